// Package fuzzy is conclave's one measure of how far apart two words are
// (the Levenshtein distance, in runes): experts match memory keys with it,
// and the command line suggests the command or the variable meant
// ("did you mean …?").
package fuzzy

// Distance is the number of runes to insert, delete or replace to turn a
// into b.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Nearest is the candidate closest to s and its distance, the first one
// on a tie; "" and -1 without candidates.
func Nearest(s string, candidates []string) (string, int) {
	best, dist := "", -1
	for _, c := range candidates {
		if d := Distance(s, c); dist < 0 || d < dist {
			best, dist = c, d
		}
	}
	return best, dist
}

// Suggest is the candidate to offer as "did you mean …?" for s: the
// nearest, when it is at most a third of s away, or two edits (one swap
// of letters, so a short word's typo is still caught); false when none is
// that near: a far guess misleads more than no guess.
func Suggest(s string, candidates []string) (string, bool) {
	near, d := Nearest(s, candidates)
	if d < 0 || d > max(2, len([]rune(s))/3) {
		return "", false
	}
	return near, true
}
