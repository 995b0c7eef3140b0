package main

import (
	"regexp"
	"strings"
)

// goTypeMismatch is how the TOML decoder says a value has the wrong type,
// in Go's words: "cannot decode TOML string into struct field
// main.ConversationConfig.MaxTurns of type int".
var goTypeMismatch = regexp.MustCompile(`cannot decode TOML (\w+) into (?:struct field \S+ of type|a Go value of type) (\S+)`)

// typeMismatchInWords rewrites the decoder's type mismatch without Go
// names ("a string where an integer is expected"); other messages are
// returned as they are.
func typeMismatchInWords(msg string) string {
	m := goTypeMismatch.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	return "a TOML " + m[1] + " where " + expectedKind(m[2]) + " is expected"
}

// expectedKind names a Go type as a configuration's author knows it.
func expectedKind(goType string) string {
	switch t := strings.TrimPrefix(goType, "*"); {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string", strings.HasSuffix(t, ".Duration"):
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	default:
		return "a table"
	}
}
