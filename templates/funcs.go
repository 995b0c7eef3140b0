package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"
)

// noValue is what text/template prints for a missing value; the string
// functions pass it through so a missing field stays visible.
const noValue = "<no value>"

// funcMap is the documented function set, on top of the text/template
// built-ins. Arguments follow Sprig's order so the piped value comes last.
// Nothing here reads files, the network or the environment.
func funcMap(clock func() time.Time) template.FuncMap {
	return template.FuncMap{
		"join":     join,
		"lower":    func(v any) string { return mapText(v, strings.ToLower) },
		"upper":    func(v any) string { return mapText(v, strings.ToUpper) },
		"trim":     func(v any) string { return mapText(v, strings.TrimSpace) },
		"truncate": truncate,
		"default":  defaultValue,
		"now":      func() time.Time { return clock() },
		"index":    index,

		"contains":  func(sub string, v any) bool { return v != nil && strings.Contains(text(v), sub) },
		"hasPrefix": func(prefix string, v any) bool { return v != nil && strings.HasPrefix(text(v), prefix) },
		"hasSuffix": func(suffix string, v any) bool { return v != nil && strings.HasSuffix(text(v), suffix) },
		"replace":   replace,
		"split":     split,
		"matches":   matches,
		"toJSON":    toJSON,
		"first":     func(list any) (any, error) { return element(list, true) },
		"last":      func(list any) (any, error) { return element(list, false) },
		"required":  required,
	}
}

// index is text/template's index, but lenient where a field read is: a
// missing map key, indexing a missing value, or indexing a text, number,
// boolean or list with a name gives no value (printed "<no value>")
// instead of failing; a person's agent-only fields fail as their field
// reads do; attribute keys match whatever their case. An index out of a
// list's range still fails. It also serves reads that text/template
// would fail on (see softenReads).
func index(item any, indexes ...any) (any, error) {
	v := reflect.ValueOf(item)
	for _, ix := range indexes {
		for v.IsValid() && v.Kind() == reflect.Interface {
			v = v.Elem()
		}
		if !v.IsValid() {
			return nil, nil
		}
		name, isName := ix.(string)
		switch v.Kind() {
		case reflect.Map:
			switch m := v.Interface().(type) {
			case attributes:
				ix = strings.ToLower(name)
			case personView:
				if isName && agentOnlyFields[name] {
					return nil, m.agentOnly(name)
				}
			}
			k := reflect.ValueOf(ix)
			if !k.IsValid() || !k.Type().AssignableTo(v.Type().Key()) {
				if !k.IsValid() || !k.Type().ConvertibleTo(v.Type().Key()) {
					return nil, fmt.Errorf("index of a map: key %v is not a %s", ix, v.Type().Key())
				}
				k = k.Convert(v.Type().Key())
			}
			if v = v.MapIndex(k); !v.IsValid() {
				return nil, nil
			}
		case reflect.Slice, reflect.Array, reflect.String:
			if isName {
				return nil, nil // a field of a text or a list
			}
			i, err := position(ix, v.Len())
			if err != nil {
				return nil, err
			}
			v = v.Index(i)
		case reflect.Struct:
			// The fast views (view.go): the render goes on the full ones.
			return nil, fmt.Errorf("can't index item of type %s", v.Type())
		default:
			if isName {
				return nil, nil // a field of a number or a boolean
			}
			return nil, fmt.Errorf("can't index item of type %s", v.Type())
		}
	}
	if !v.IsValid() {
		return nil, nil
	}
	return v.Interface(), nil
}

// agentOnlyFields are the member fields a person does not have.
var agentOnlyFields = map[string]bool{"EnsDomain": true, "Owner": true, "Addresses": true, "Attributes": true}

// position reads a list index: an integer in [0, n).
func position(ix any, n int) (int, error) {
	var i int64
	switch v := reflect.ValueOf(ix); v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i = v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() > uint64(n) { // #nosec G115 -- n is a list's length, never negative
			return 0, fmt.Errorf("index out of range: %d", v.Uint())
		}
		i = int64(v.Uint()) // #nosec G115 -- at most n, an int, as checked above
	default:
		return 0, fmt.Errorf("cannot index a list with %v", ix)
	}
	if i < 0 || i >= int64(n) {
		return 0, fmt.Errorf("index out of range: %d", i)
	}
	return int(i), nil
}

// text is how a value prints in a template.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return noValue
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

func mapText(v any, f func(string) string) string {
	if v == nil {
		return noValue
	}
	return f(text(v))
}

// join writes the items of a list separated by sep; a string is a list of
// one.
func join(sep string, list any) (string, error) {
	if list == nil {
		return noValue, nil
	}
	if s, ok := list.(string); ok {
		return s, nil
	}
	v := reflect.ValueOf(list)
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return "", fmt.Errorf("join needs a list, not %T", list)
	}
	parts := make([]string, v.Len())
	for i := range parts {
		parts[i] = text(v.Index(i).Interface())
	}
	return strings.Join(parts, sep), nil
}

// truncate keeps the first n characters of v; a negative n keeps the last
// -n characters.
func truncate(n int, v any) string {
	if v == nil {
		return noValue
	}
	s := text(v)
	count := utf8.RuneCountInString(s)
	switch {
	case n >= count || -n >= count:
		return s
	case n >= 0:
		return string([]rune(s)[:n])
	default:
		return string([]rune(s)[count+n:])
	}
}

// defaultValue is def when v is empty (missing, false, 0, "", or an empty
// list or map), else v.
func defaultValue(def, v any) any {
	if isEmpty(v) {
		return def
	}
	return v
}

func isEmpty(v any) bool {
	switch v.(type) {
	case nil:
		return true
	case view:
		return false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return rv.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	}
	return rv.IsZero()
}

// replace replaces every old in v with new.
func replace(old, new string, v any) string {
	return mapText(v, func(s string) string { return strings.ReplaceAll(s, old, new) })
}

// split cuts v around each sep; a missing value is an empty list.
func split(sep string, v any) []string {
	if v == nil {
		return []string{}
	}
	return strings.Split(text(v), sep)
}

// matches reports whether v holds a match of the regular expression re
// (Go syntax, unanchored).
func matches(re string, v any) (bool, error) {
	rx, err := regexp.Compile(re)
	if err != nil {
		return false, fmt.Errorf("matches: %w", err)
	}
	return v != nil && rx.MatchString(text(v)), nil
}

// toJSON writes v as JSON, views as their full view (keys sorted), with
// no HTML escaping: a prompt is not a web page.
func toJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fullView(v)); err != nil {
		return "", fmt.Errorf("toJSON: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// fullView is v with every fast view inside it replaced by its full view,
// so that what toJSON writes does not depend on the view a render used.
func fullView(v any) any {
	switch v := v.(type) {
	case agentFields:
		return v.full
	case personFields:
		return v.full
	case requestFields:
		return v.req.templateView()
	case messageFields:
		return v.msg.templateView()
	case dataFields:
		return v.data.templateView()
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fullView(e)
		}
		return out
	}
	return v
}

// element is the first (or last) item of a list, or character of a text;
// no value when it is empty or missing.
func element(list any, first bool) (any, error) {
	if list == nil {
		return nil, nil
	}
	v := reflect.ValueOf(list)
	switch v.Kind() {
	case reflect.String:
		r := []rune(v.String())
		if len(r) == 0 {
			return nil, nil
		}
		if first {
			return string(r[0]), nil
		}
		return string(r[len(r)-1]), nil
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			return nil, nil
		}
		if first {
			return v.Index(0).Interface(), nil
		}
		return v.Index(v.Len() - 1).Interface(), nil
	}
	return nil, fmt.Errorf("first and last need a list, not %T", list)
}

// ErrRequired is what a render that required stopped wraps: the
// template's author wrote its message, which may be shown to people.
var ErrRequired = errors.New("templates: a required value is missing")

// requiredError is what required fails with: the author's message.
type requiredError struct{ what string }

func (e *requiredError) Error() string { return e.what }

func (e *requiredError) Unwrap() error { return ErrRequired }

// required is v, or an error saying what when v is missing, a text of
// nothing but white space, or an empty list or map. Numbers and booleans
// are never missing.
func required(what string, v any) (any, error) {
	empty := v == nil
	switch rv := reflect.ValueOf(v); {
	case empty:
	case rv.Kind() == reflect.String:
		empty = strings.TrimSpace(rv.String()) == ""
	case rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map || rv.Kind() == reflect.Array:
		_, isView := v.(view)
		empty = !isView && rv.Len() == 0
	}
	if empty {
		return nil, &requiredError{what: what}
	}
	return v, nil
}
