// Package clip is conclave's one truncation helper: text cut to a number
// of characters (runes, never inside one), with a mark saying it was cut.
// The engine caps long messages with it, the LLM client the server text
// it quotes, and the Slack transport names and sections to Slack's limits.
package clip

import "unicode/utf8"

// Runes keeps the first n runes of s and, when it cut something, appends
// mark. n <= 0 means no limit.
func Runes(s string, n int, mark string) string {
	if n <= 0 || len(s) <= n {
		return s // at most n bytes: at most n runes
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i] + mark
		}
		count++
	}
	return s
}

// Bytes keeps at most n bytes of s, never cutting inside a rune, and,
// when it cut something, appends mark. n <= 0 means no limit.
func Bytes(s string, n int, mark string) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}
