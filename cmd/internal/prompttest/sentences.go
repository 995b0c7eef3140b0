package prompttest

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// continuation starts each line that SplitSentences made by breaking a
// line of the message after a sentence: the reader sees a sentence break
// as an indented line and a line of the message as a line at the margin.
const continuation = "  "

// escape starts a line of the message that itself begins with a space or
// with escape, so that it is never read as a continuation.
const escape = `\`

// SplitSentences writes a message's content with one sentence a line, for
// golden files: a line of the content is broken at each single space that
// follows a sentence's end (., ? or !, then at most one closing quote or
// bracket) and precedes a capital letter, a digit, an opening quote or
// bracket, or a symbol such as an emoji. The space becomes a line break
// and the continuation indent. A '.' does not end a sentence after an
// abbreviation: a word of dotted letters (e.g., i.e., a.m., U.S.), a single
// capital (an initial), a number of one or two digits (a list item) or one
// of a few titles (Mr, Mrs, Ms, Dr, Prof, St, vs, cf). Text without spaces
// (URLs, decimals such as 1.5) is never broken. The content's own lines are
// kept, a line beginning with a space or a backslash marked by a leading
// backslash, so JoinSentences gives the content back: two different
// contents never give the same text.
func SplitSentences(content string) string {
	lines := strings.Split(content, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, escape) {
			line = escape + line
		}
		lines[i] = breakSentences(line)
	}
	return strings.Join(lines, "\n")
}

// JoinSentences is the inverse of SplitSentences.
func JoinSentences(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, escape):
			out = append(out, strings.TrimPrefix(line, escape))
		case strings.HasPrefix(line, continuation) && len(out) > 0:
			out[len(out)-1] += " " + strings.TrimPrefix(line, continuation)
		default:
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// breakSentences breaks one line at each sentence break.
func breakSentences(line string) string {
	var b strings.Builder
	last := 0
	for i := 1; i+1 < len(line); i++ {
		if line[i] != ' ' || !sentenceEnds(line[:i]) {
			continue
		}
		next, _ := utf8.DecodeRuneInString(line[i+1:])
		if !opensSentence(next) {
			continue
		}
		b.WriteString(line[last:i])
		b.WriteString("\n" + continuation)
		last = i + 1
	}
	b.WriteString(line[last:])
	return b.String()
}

// sentenceEnds tells whether text, the line up to a space, ends a
// sentence.
func sentenceEnds(text string) bool {
	r, size := utf8.DecodeLastRuneInString(text)
	if strings.ContainsRune(`"')]”’»`, r) {
		text = text[:len(text)-size]
		r, _ = utf8.DecodeLastRuneInString(text)
	}
	switch r {
	case '?', '!':
		return true
	case '.':
		word := text[strings.LastIndexByte(text, ' ')+1 : len(text)-1]
		return !abbreviation(strings.TrimLeft(word, `"'([“‘«`))
	}
	return false
}

// titles are the abbreviations a '.' follows inside a sentence.
var titles = map[string]bool{"Mr": true, "Mrs": true, "Ms": true, "Dr": true, "Prof": true, "St": true, "vs": true, "cf": true}

// abbreviation tells whether word, followed by a '.', is an abbreviation
// rather than a sentence's last word.
func abbreviation(word string) bool {
	if titles[word] {
		return true
	}
	if len(word) == 1 && word[0] >= 'A' && word[0] <= 'Z' {
		return true
	}
	if len(word) >= 1 && len(word) <= 2 && strings.Trim(word, "0123456789") == "" {
		return true
	}
	parts := strings.Split(word, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if len(p) < 1 || len(p) > 2 || strings.IndexFunc(p, func(r rune) bool { return !unicode.IsLetter(r) }) >= 0 {
			return false
		}
	}
	return true
}

// opensSentence tells whether r can start a sentence.
func opensSentence(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsDigit(r) || strings.ContainsRune(`"'(“‘«*`, r) ||
		unicode.Is(unicode.So, r)
}
