package templates

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// decodeSettings reads one settings file strictly: unknown keys, wrong
// types and values out of range are errors naming the line.
func decodeSettings(name string, body []byte) (Settings, error) {
	var s Settings
	dec := toml.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&s)
	var strict *toml.StrictMissingError
	var decode *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		errs := make([]error, 0, len(strict.Errors))
		for _, e := range strict.Errors {
			line, _ := e.Position()
			errs = append(errs, &Error{File: name, Line: line, Message: fmt.Sprintf("unknown key %q (keys: %s)", strings.Join(e.Key(), "."), settingsKeys)})
		}
		return Settings{}, errors.Join(errs...)
	case errors.As(err, &decode):
		line, _ := decode.Position()
		msg := strings.TrimPrefix(decode.Error(), "toml: ")
		if m := typeErrorRE.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("%s must be %s, not a TOML %s", strings.Join(decode.Key(), "."), tomlTypeNames[m[2]], m[1])
		}
		return Settings{}, &Error{File: name, Line: line, Message: msg, err: err}
	case err != nil:
		return Settings{}, &Error{File: name, Message: err.Error(), err: err}
	}
	var errs []error
	bad := func(key, msg string) {
		errs = append(errs, &Error{File: name, Line: keyLine(body, key), Message: key + " " + msg})
	}
	if s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2) {
		bad("temperature", "must be between 0 and 2")
	}
	if s.MaxTokens < 0 {
		bad("max_tokens", "must not be negative")
	}
	if s.MaxInputTokens < 0 {
		bad("max_input_tokens", "must not be negative")
	}
	if s.Tools != nil {
		for _, t := range *s.Tools {
			if !toolSelectionRE.MatchString(t) {
				bad("tools", fmt.Sprintf("entry %q is not \"server\" or \"server/tool\" (server names are [a-z0-9_-]+)", t))
			}
		}
	}
	if len(errs) > 0 {
		return Settings{}, errors.Join(errs...)
	}
	return s, nil
}

// toolSelectionRE is one entry of tools: a server, or one tool of it.
var toolSelectionRE = regexp.MustCompile(`^[a-z0-9_-]+(/[^/\s]+)?$`)

var typeErrorRE = regexp.MustCompile(`^cannot decode TOML (\w+) into struct field \S+ of type \*?(\w+)`)

var tomlTypeNames = map[string]string{"string": "a string", "float64": "a number", "int": "an integer", "bool": "true or false"}

const settingsKeys = "llm_profile, model, temperature, max_tokens, max_input_tokens, include_history, json, tools"

// keyLine finds the line where key is set, for errors the decoder cannot
// place.
func keyLine(body []byte, key string) int {
	re := regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(key) + `"?\s*=`)
	for i, line := range strings.Split(string(body), "\n") {
		if re.MatchString(line) {
			return i + 1
		}
	}
	return 0
}

// merge fills the keys s leaves unset from lower.
func (s Settings) merge(lower Settings) Settings {
	if s.LLMProfile == "" {
		s.LLMProfile = lower.LLMProfile
	}
	if s.Model == "" {
		s.Model = lower.Model
	}
	if s.Temperature == nil {
		s.Temperature = lower.Temperature
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = lower.MaxTokens
	}
	if s.MaxInputTokens == 0 {
		s.MaxInputTokens = lower.MaxInputTokens
	}
	if s.IncludeHistory == nil {
		s.IncludeHistory = lower.IncludeHistory
	}
	if s.JSON == nil {
		s.JSON = lower.JSON
	}
	if s.Tools == nil {
		s.Tools = lower.Tools
	}
	return s
}
