package bot

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text in both directions. Inbound, Slack's wire format (<@U…>, <#C…|name>,
// <url|label>, &amp; entities) is turned into the plain text people saw.
// Outbound, model text is made inert for Slack: entities escaped so no
// control sequence (<!channel>, <@U…>, <url|label>) can form, Markdown links
// spelled out so none can hide its target, and long text split into pieces
// that fit a markdown block.

// nameLookup resolves a Slack id to a name: kind '@' for users, '#' for
// channels. ok is false when the name is unknown.
type nameLookup func(kind byte, id string) (name string, ok bool)

var unescapeEntities = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")

// normalizeText turns Slack wire text into what a reader sees: <@U1> →
// @Display Name, <#C1|general> → #general, <url|label> → label (url),
// <!here> → @here, and the three entities unescaped. A '<' that opens no
// markup is kept as it is.
func normalizeText(s string, lookup nameLookup) string {
	if !strings.ContainsAny(s, "<&") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+1:], '>')
		if j < 0 {
			break
		}
		inner := s[i+1 : i+1+j]
		if inner == "" || strings.ContainsAny(inner, "<\n") {
			b.WriteString(unescapeEntities.Replace(s[:i+1]))
			s = s[i+1:]
			continue
		}
		b.WriteString(unescapeEntities.Replace(s[:i]))
		b.WriteString(normalizeMarkup(inner, lookup))
		s = s[i+j+2:]
	}
	b.WriteString(unescapeEntities.Replace(s))
	return b.String()
}

// normalizeMarkup renders the inside of one <…> sequence.
func normalizeMarkup(inner string, lookup nameLookup) string {
	target, label, _ := strings.Cut(inner, "|")
	label = unescapeEntities.Replace(label)
	switch {
	case strings.HasPrefix(target, "@"):
		id := target[1:]
		if name, ok := lookup('@', id); ok {
			return "@" + name
		}
		if label != "" {
			return "@" + strings.TrimPrefix(label, "@")
		}
		return "@" + id
	case strings.HasPrefix(target, "#"):
		id := target[1:]
		if label != "" {
			return "#" + label
		}
		if name, ok := lookup('#', id); ok {
			return "#" + name
		}
		return "#" + id
	case strings.HasPrefix(target, "!"):
		cmd := target[1:]
		switch {
		case cmd == "here" || cmd == "channel" || cmd == "everyone":
			return "@" + cmd
		case strings.HasPrefix(cmd, "subteam^"):
			if label != "" {
				return "@" + strings.TrimPrefix(label, "@")
			}
			return "@" + strings.TrimPrefix(cmd, "subteam^")
		case label != "":
			return label // <!date^…|fallback> and the like
		default:
			return cmd
		}
	}
	url := unescapeEntities.Replace(target)
	switch {
	case label == "" || label == url || "mailto:"+label == url:
		if label != "" {
			return label
		}
		return url
	case sameLink(label, url):
		// Slack's own auto-link of a bare "example.com": the label is what
		// the author typed.
		return label
	default:
		return label + " (" + url + ")"
	}
}

// sameLink reports whether label is url without its scheme (and without a
// trailing slash).
func sameLink(label, url string) bool {
	for _, scheme := range []string{"https://", "http://"} {
		if rest, ok := strings.CutPrefix(url, scheme); ok {
			return label == rest || label+"/" == rest
		}
	}
	return false
}

// textLine is one line of a text, with its place in a fenced code block.
type textLine struct {
	start, end int    // byte offsets; end excludes the newline
	fence      bool   // inside a ``` block, its delimiter lines included
	openAfter  bool   // a ``` block is still open after this line
	marker     string // the open block's delimiter (```, ````, …)
	reopen     string // the delimiter and language to reopen it with
}

// scanLines splits s into lines and tracks ``` code fences, as CommonMark
// does: an opening run of three or more backticks (after at most three
// spaces) is closed by a run at least as long with nothing after it. Tilde
// fences are not treated as code, so nothing can hide in a block Slack
// might not render as one.
func scanLines(s string) []textLine {
	var out []textLine
	open := false
	var marker, reopen string
	for start := 0; ; {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		ln := textLine{start: start, end: end, fence: open}
		if run, info, ok := fenceLine(s[start:end], false); ok {
			switch {
			case !open:
				open, marker = true, run
				reopen = run + firstWord(info, 20)
				ln.fence = true
			case len(run) >= len(marker) && strings.TrimSpace(info) == "":
				open = false
			}
		}
		ln.openAfter, ln.marker, ln.reopen = open, marker, reopen
		out = append(out, ln)
		if end == len(s) {
			return out
		}
		start = end + 1
	}
}

func firstWord(s string, max int) string {
	f := strings.Fields(s)
	if len(f) == 0 || len(f[0]) > max {
		return ""
	}
	return f[0]
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escapeSlack escapes &, < and > so that no Slack control sequence can form.
// Outside code fences, the '>' markers that open a block quote at the start
// of a line stay as they are: a lone '>' opens nothing, and Slack needs it
// literal to draw the quote.
func escapeSlack(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for i, ln := range scanLines(s) {
		if i > 0 {
			b.WriteByte('\n')
		}
		line := s[ln.start:ln.end]
		if !ln.fence {
			q := quotePrefix(line)
			b.WriteString(line[:q])
			line = line[q:]
		}
		b.WriteString(slackEscaper.Replace(line))
	}
	return b.String()
}

// escapeMarkdown makes model text inert for a markdown block. Outside code
// it escapes like escapeSlack. Inside code — the lines every reading of
// Markdown puts in a fenced block (see proseLines), and inline code spans —
// &, < and > stay as written: a markdown block is standard Markdown, where
// code shows its characters verbatim and no entity is decoded, so an
// escaped "<" would show as "&lt;". Only a '<' in code that would open a
// Slack control sequence (breakTokens) gets a zero-width space after it, so
// that no ping or disguised link can form there either.
func escapeMarkdown(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, prose := range proseLines(lines) {
		line := lines[i]
		if _, _, delimiter := fenceLine(line, true); !prose && !delimiter {
			lines[i] = breakTokens(line)
			continue
		}
		q := quotePrefix(line)
		var b strings.Builder
		b.Grow(len(line) + len(line)/8)
		b.WriteString(line[:q])
		forEachOutsideCode(line[q:], func(text string, code bool) {
			if code {
				b.WriteString(breakInlineTokens(text))
			} else {
				b.WriteString(slackEscaper.Replace(text))
			}
		})
		lines[i] = b.String()
	}
	return strings.Join(lines, "\n")
}

// slackToken matches what Slack would read as a control sequence: a '<'
// followed by a target without white space that is a mention, a channel,
// a command (@, #, !) or a link (it holds ':'), up to '|' or '>'.
var slackToken = regexp.MustCompile(`<(?:[@#!][^\s<>|]*|[^\s<>|]*:[^\s<>|]*)[|>]`)

// zeroWidthSpace keeps a '<' in code from opening a Slack control sequence
// without changing what a reader sees.
const zeroWidthSpace = "\u200b"

// breakTokens puts a zero-width space after each '<' of code that would
// open a Slack control sequence (<!here>, <@U…>, <http://…|label>).
func breakTokens(code string) string {
	if !strings.Contains(code, "<") {
		return code
	}
	return slackToken.ReplaceAllStringFunc(code, func(m string) string {
		return "<" + zeroWidthSpace + m[1:]
	})
}

// openToken is a '<' of an inline code span whose target runs to the span's
// end: the text after the span may close it into a control sequence.
var openToken = regexp.MustCompile(`<[^\s<>|]*$`)

// breakInlineTokens is breakTokens for an inline code span, which the
// line's text goes on after: a '<' whose target reaches the span's end is
// broken too.
func breakInlineTokens(code string) string {
	code = breakTokens(code)
	if loc := openToken.FindStringIndex(code); loc != nil {
		code = code[:loc[0]+1] + zeroWidthSpace + code[loc[0]+1:]
	}
	return code
}

// escapeLeftovers escapes what escapeMarkdown left as written, for a
// message's plain-text fallback (mrkdwn, where &, < and > are control
// characters in code too): every raw '<' and '>' except the block-quote
// markers opening a line, and every '&' that does not start one of the
// three entities.
func escapeLeftovers(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		q := quotePrefix(line)
		var b strings.Builder
		b.Grow(len(line) + len(line)/8)
		b.WriteString(line[:q])
		rest := line[q:]
		for j := 0; j < len(rest); j++ {
			switch c := rest[j]; {
			case c == '<':
				b.WriteString("&lt;")
			case c == '>':
				b.WriteString("&gt;")
			case c == '&' && !hasEntityAt(rest, j):
				b.WriteString("&amp;")
			default:
				b.WriteByte(c)
			}
		}
		lines[i] = b.String()
	}
	return strings.Join(lines, "\n")
}

func hasEntityAt(s string, i int) bool {
	for _, e := range []string{"&amp;", "&lt;", "&gt;"} {
		if strings.HasPrefix(s[i:], e) {
			return true
		}
	}
	return false
}

// quotePrefix is the length of the block-quote markers opening line: up to
// three spaces, then '>' characters, each optionally followed by spaces.
func quotePrefix(line string) int {
	i := 0
	for i < len(line) && i < 3 && line[i] == ' ' {
		i++
	}
	if i >= len(line) || line[i] != '>' {
		return 0
	}
	for i < len(line) && (line[i] == '>' || line[i] == ' ') {
		i++
	}
	return i
}

// markdownLink matches [label](url) and ![alt](url), with an optional
// "title"; the url may be wrapped in <…>.
var markdownLink = regexp.MustCompile(`!?\[([^\[\]\n]*)\]\(\s*(<[^<>\n]*>|[^\s()<>]+)(?:\s+"[^"\n]*")?\s*\)`)

// linkSyntax breaks what is left of Markdown link syntax once the links
// that parse are spelled out: "](" opens an inline link's target and "]:"
// a link reference definition, and neither may have a space inside.
var linkSyntax = strings.NewReplacer("](", "] (", "]:", "] :")

// spellOutLinks rewrites Markdown links as "label (url)", so a link always
// shows where it goes. Inline code is not spelled out, and fenced code
// only when some reading of Markdown could take it for prose (see
// proseLines); beyond that, every "](" and "]:" gets a space, so that no
// form the spelling-out does not parse (brackets in the label, parentheses
// in the url, reference links) can form a link.
func spellOutLinks(s string) string {
	if !strings.Contains(s, "](") && !strings.Contains(s, "]:") {
		return s
	}
	return rewriteProse(s, func(line string) string {
		var b strings.Builder
		b.Grow(len(line))
		forEachOutsideCode(line, func(text string, code bool) {
			if code {
				b.WriteString(text)
				return
			}
			b.WriteString(markdownLink.ReplaceAllStringFunc(text, func(m string) string {
				sub := markdownLink.FindStringSubmatch(m)
				label := strings.TrimSpace(sub[1])
				url := strings.TrimSuffix(strings.TrimPrefix(sub[2], "<"), ">")
				if label == "" || label == url || sameLink(label, url) {
					return url
				}
				return label + " (" + url + ")"
			}))
		})
		return linkSyntax.Replace(b.String())
	})
}

// userMention is Slack's markup for a user mention: <@U…> or <@U…|label>.
var userMention = regexp.MustCompile(`<@` + userIDPattern + `(?:\|[^<>\n]*)?>`)

// userIDPattern is a Slack user id: U…, or W… in an Enterprise Grid. The
// one pattern for user ids: mentions, command arguments and the
// configuration's slack.admins are read with it.
const userIDPattern = `[UW][A-Z0-9]+`

var slackUserID = regexp.MustCompile(`^` + userIDPattern + `$`)

// IsUserID reports whether s is a Slack user id (U… or W…).
func IsUserID(s string) bool { return slackUserID.MatchString(s) }

// nameUsers writes the user mentions in model text as "@Display Name", as
// a reader of the thread sees them (display name, else real name, else
// user name; the label or the id when unknown), so that a post names
// people without pinging them. Fenced code is left as it is.
func nameUsers(s string, lookup nameLookup) string {
	if !strings.Contains(s, "<@") {
		return s
	}
	return rewriteProse(s, func(line string) string {
		// Naming a mention can close a new one around it ("<<@U1>>"), so
		// go again while something changes; each pass shortens the markup.
		for range 8 {
			named := userMention.ReplaceAllStringFunc(line, func(m string) string {
				return strings.Map(func(r rune) rune {
					if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
						return ' '
					}
					return r
				}, normalizeMarkup(m[1:len(m)-1], lookup))
			})
			if named == line {
				break
			}
			line = named
		}
		return line
	})
}

// rewriteProse applies fn to every line of s that is not surely fenced
// code (see proseLines).
func rewriteProse(s string, fn func(line string) string) string {
	lines := strings.Split(s, "\n")
	for i, prose := range proseLines(lines) {
		if prose {
			lines[i] = fn(lines[i])
		}
	}
	return strings.Join(lines, "\n")
}

// fenceReading is one way a Markdown renderer may find fenced code.
type fenceReading struct {
	tildes     bool // ~~~ opens a fence too
	containers bool // a fence may open inside a block quote or a list item
}

var fenceReadings = []fenceReading{{false, false}, {true, false}, {false, true}, {true, true}}

// proseLines reports, for each line, whether a renderer could show it as
// prose: true unless every reading puts it in a fenced code block. Text
// only one reading takes for code (a fence opened in a list item, ```
// inside a ~~~ block) is prose for the others, so it is rewritten like
// prose: nothing can hide in a block the renderer might not draw as code.
func proseLines(lines []string) []bool {
	prose := make([]bool, len(lines))
	for _, r := range fenceReadings {
		open := ""
		for i, line := range lines {
			if r.containers {
				line = stripContainers(line)
			}
			run, info, ok := fenceLine(line, r.tildes)
			switch {
			case open == "" && ok:
				open = run
			case open == "":
				prose[i] = true
			case ok && run[0] == open[0] && len(run) >= len(open) && strings.TrimSpace(info) == "":
				open = ""
			}
		}
	}
	return prose
}

// fenceLine reports whether line is a fence delimiter: up to three spaces,
// then a run of three or more backticks (or tildes), and what follows it.
func fenceLine(line string, tildes bool) (run, info string, ok bool) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return "", "", false
	}
	c := byte('`')
	if tildes && strings.HasPrefix(trimmed, "~~~") {
		c = '~'
	}
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	if n < 3 || c == '`' && strings.IndexByte(trimmed[n:], '`') >= 0 {
		return "", "", false
	}
	return trimmed[:n], trimmed[n:], true
}

// stripContainers removes the block-quote markers and list markers that
// open a line, and the indentation around them.
func stripContainers(line string) string {
	for {
		rest := strings.TrimLeft(line, " \t")
		switch {
		case strings.HasPrefix(rest, ">"):
			rest = rest[1:]
		case len(rest) >= 2 && strings.IndexByte("-+*", rest[0]) >= 0 && (rest[1] == ' ' || rest[1] == '\t'):
			rest = rest[2:]
		default:
			d := 0
			for d < len(rest) && d < 9 && '0' <= rest[d] && rest[d] <= '9' {
				d++
			}
			if d == 0 || d+1 >= len(rest) || rest[d] != '.' && rest[d] != ')' || rest[d+1] != ' ' && rest[d+1] != '\t' {
				return rest
			}
			rest = rest[d+2:]
		}
		line = rest
	}
}

// forEachOutsideCode splits line into inline code spans (a run of n
// backticks up to the next run of exactly n) and the text between them.
func forEachOutsideCode(line string, fn func(text string, code bool)) {
	for len(line) > 0 {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			fn(line, false)
			return
		}
		n := i
		for n < len(line) && line[n] == '`' {
			n++
		}
		run := line[i:n]
		end := closingRun(line[n:], len(run))
		if end < 0 {
			fn(line[:n], false)
			line = line[n:]
			continue
		}
		if i > 0 {
			fn(line[:i], false)
		}
		fn(line[i:n+end+len(run)], true)
		line = line[n+end+len(run):]
	}
}

// closingRun finds the next run of exactly n backticks in s.
func closingRun(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// splitText cuts s into pieces of at most max bytes. It cuts at the latest
// paragraph break, else line break, else sentence end, else space, that
// leaves a piece of at least half the limit (or at the best one there is),
// and never inside a code fence; a fence longer than the limit is closed at
// the end of one piece and reopened at the start of the next. A single word
// longer than the limit is cut without splitting a character or an entity.
// max must be well above the longest fence delimiter (≥ 100).
func splitText(s string, max int) []string {
	var out []string
	for len(s) > max {
		head, rest := cutOnce(s, max)
		if strings.TrimSpace(head) != "" {
			out = append(out, head)
		}
		s = rest
	}
	if strings.TrimSpace(s) != "" {
		out = append(out, s)
	}
	return out
}

// Cut kinds, by preference.
const (
	cutSpace = iota
	cutSentence
	cutLine
	cutParagraph
)

func cutOnce(s string, max int) (head, rest string) {
	best, bestKind := -1, -1
	consider := func(pos, kind int) {
		if pos <= 0 {
			return
		}
		better := best < 0
		if !better {
			long, bestLong := 2*pos >= max, 2*best >= max
			better = long && !bestLong ||
				long == bestLong && (kind > bestKind || kind == bestKind && pos > best)
		}
		if better {
			best, bestKind = pos, kind
		}
	}
	// Only the lines up to the one that crosses max matter.
	window := s
	if nl := strings.IndexByte(s[max:], '\n'); nl >= 0 && max+nl < len(s) {
		window = s[:max+nl]
	}
	if len(window) > max+4096 {
		window = window[:max+4096]
	}
	lines := scanLines(window)
	var straddle *textLine
	for i := range lines {
		ln := &lines[i]
		if ln.start > max {
			break
		}
		if ln.end > max {
			straddle = ln
			break
		}
		if !ln.fence && strings.TrimSpace(s[ln.start:ln.end]) == "" {
			consider(ln.start, cutParagraph)
		}
		if !ln.openAfter {
			consider(ln.end, cutLine)
		}
	}
	if straddle != nil && !straddle.fence {
		for i := straddle.start + 1; i < max; i++ {
			if s[i] != ' ' {
				continue
			}
			if strings.IndexByte(".!?;:", s[i-1]) >= 0 {
				consider(i, cutSentence)
			} else {
				consider(i, cutSpace)
			}
		}
	}
	if best > 0 {
		head = strings.TrimRight(s[:best], " \t\n")
		rest = strings.TrimLeft(s[best:], "\n")
		if bestKind <= cutSentence {
			rest = strings.TrimLeft(rest, " ")
		}
		return head, rest
	}
	if straddle != nil && straddle.fence && straddle.openAfter {
		if head, rest, ok := cutInFence(s, lines, straddle, max); ok {
			return head, rest
		}
	}
	pos := safeCut(s, max)
	return s[:pos], s[pos:]
}

// cutInFence cuts inside the code block that straddles max, closing it at
// the end of the head and reopening it at the start of the rest.
func cutInFence(s string, lines []textLine, straddle *textLine, max int) (head, rest string, ok bool) {
	closing := "\n" + straddle.marker
	budget := max - len(closing)
	// The block's content starts after its opening line.
	first := 0
	for i := range lines {
		if lines[i].start > straddle.start {
			break
		}
		if lines[i].fence && (i == 0 || !lines[i-1].openAfter) {
			first = lines[i].end + 1
		}
	}
	pos := -1
	for i := range lines {
		ln := lines[i]
		if ln.start >= first && ln.end <= budget && ln.openAfter && ln.start <= straddle.start {
			pos = ln.end
		}
	}
	if pos < 0 {
		if budget <= first {
			return "", "", false
		}
		pos = safeCut(s, budget)
		if pos <= first {
			return "", "", false
		}
	}
	return s[:pos] + closing, straddle.reopen + "\n" + strings.TrimPrefix(s[pos:], "\n"), true
}

// safeCut moves a cut at p back so it splits neither a UTF-8 character, nor
// an entity such as &amp;, nor a <@U…> mention; it always returns at least 1.
func safeCut(s string, p int) int {
	p = min(p, len(s))
	for p > 0 && p < len(s) && !utf8.RuneStart(s[p]) {
		p--
	}
	if amp := strings.LastIndexByte(s[max(0, p-5):p], '&'); amp >= 0 {
		at := max(0, p-5) + amp
		if !strings.Contains(s[at:p], ";") {
			p = at
		}
	}
	if lt := strings.LastIndexByte(s[max(0, p-32):p], '<'); lt >= 0 {
		at := max(0, p-32) + lt
		if !strings.Contains(s[at:p], ">") {
			p = at
		}
	}
	if p <= 0 {
		_, n := utf8.DecodeRuneInString(s)
		return max(n, 1)
	}
	return p
}
