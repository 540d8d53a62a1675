package scheduler

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// SystemMemoryUsed returns the used fraction of the machine's memory from
// /proc/meminfo: 1 - MemAvailable/MemTotal.
func SystemMemoryUsed() (float64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read memory usage: %w", err)
	}
	defer f.Close()
	var total, avail float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, err := strconv.ParseFloat(fs[0], 64)
		if err != nil {
			continue
		}
		switch k {
		case "MemTotal":
			total = n
		case "MemAvailable":
			avail = n
		}
	}
	if total <= 0 || avail < 0 || avail > total {
		return 0, fmt.Errorf("read memory usage: /proc/meminfo has no usable MemTotal/MemAvailable")
	}
	return 1 - avail/total, nil
}
