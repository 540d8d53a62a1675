package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// coverageRunners are the runners whose coverage test.run measures (go:
// coverprofile; node: lcov). The others say so in the summary.
var coverageRunners = map[string]bool{"go": true, "node": true}

// maxLcovBytes bounds the lcov report read (the project's code decides
// its size).
const maxLcovBytes = 16 << 20

// lcovCoverage summarises an lcov tracefile (SF: a file, LF/LH: its lines
// found and hit, end_of_record) as line coverage per project file and in
// total. Files outside the project are left out; nil when there is no
// report or no line in it.
func lcovCoverage(report, ws string) *testrun.Coverage {
	f, err := os.Open(report)
	if err != nil {
		return nil
	}
	defer f.Close()
	files := map[string]*coverCount{}
	var cur *coverCount
	sc := bufio.NewScanner(io.LimitReader(f, maxLcovBytes))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), ":")
		switch key {
		case "SF":
			rel := relToWorkspace(ws, ws, val)
			if rel == "" || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
				cur = nil // outside the project
				continue
			}
			if cur = files[rel]; cur == nil {
				cur = &coverCount{}
				files[rel] = cur
			}
		case "LF", "LH":
			n, err := strconv.Atoi(val)
			if cur == nil || err != nil || n < 0 {
				continue
			}
			if key == "LF" {
				cur.total += n
			} else {
				cur.hit += n
			}
		case "end_of_record":
			cur = nil
		}
	}
	if len(files) == 0 {
		return nil
	}
	return summariseCoverage(files)
}

// coverCount is one file's covered and total units: statements for Go's
// coverprofile, lines for lcov.
type coverCount struct{ hit, total int }

// summariseCoverage is test.run's Coverage of per-file counts: percent per
// file and in total, rounded down to 0.1 (a hit count over the total, as a
// malformed report may claim, counts as the total).
func summariseCoverage(files map[string]*coverCount) *testrun.Coverage {
	pct := func(h, t int) float64 {
		if t == 0 {
			return 0
		}
		return float64(int(float64(min(h, t))*1000/float64(t))) / 10
	}
	cov := &testrun.Coverage{Files: map[string]float64{}}
	var hit, total int
	for n, c := range files {
		cov.Files[n] = pct(c.hit, c.total)
		hit += min(c.hit, c.total)
		total += c.total
	}
	cov.Percent = pct(hit, total)
	return cov
}
