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
	type fc struct{ found, hit int }
	files := map[string]*fc{}
	var cur *fc
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
				cur = &fc{}
				files[rel] = cur
			}
		case "LF", "LH":
			n, err := strconv.Atoi(val)
			if cur == nil || err != nil || n < 0 {
				continue
			}
			if key == "LF" {
				cur.found += n
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
	pct := func(h, t int) float64 {
		if t == 0 {
			return 0
		}
		return float64(int(float64(min(h, t))*1000/float64(t))) / 10
	}
	cov := &testrun.Coverage{Files: map[string]float64{}}
	var found, hit int
	for n, c := range files {
		cov.Files[n] = pct(c.hit, c.found)
		found += c.found
		hit += c.hit
	}
	cov.Percent = pct(hit, found)
	return cov
}
