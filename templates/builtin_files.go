package templates

import (
	"io/fs"
)

// BuiltinFiles is the built-in prompts as a config repository lays them
// out (<role>/<prompt>.tmpl, partials/), for `conclave templates init`
// to copy into a new one.
func BuiltinFiles() fs.FS {
	sub, err := fs.Sub(defaultsFS, "defaults")
	if err != nil {
		panic(err) // "defaults" is embedded: a valid path that exists
	}
	return sub
}

// BuiltinFixtureJSON is the built-in fixture of role ("expert",
// "facilitator" or "clone"; the expert's for any other) as JSON, for
// authors to copy and edit.
func BuiltinFixtureJSON(role string) []byte {
	switch role {
	case "facilitator":
		return append([]byte(nil), builtinFacilitatorFixture...)
	case "clone":
		return append([]byte(nil), builtinCloneFixture...)
	default:
		return append([]byte(nil), builtinFixture...)
	}
}
