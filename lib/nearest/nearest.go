package nearest

// maxLen bounds the inputs compared: a name longer than this is not a typo
// of a short keyword, and untrusted text must not cost quadratic time.
const maxLen = 64

// Name returns the entry of known closest to s, if its edit distance is at
// most max (the first such entry on a tie), else "".
func Name(s string, known []string, max int) string {
	best, bestD := "", max+1
	for _, k := range known {
		if d := Distance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Distance is the Levenshtein distance of a and b in bytes (insertions,
// deletions, substitutions); inputs over 64 bytes are infinitely far.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
