package templates

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxGenerated bounds a generated value, as OpenShift's generator does.
const maxGenerated = 255

// classes are the escapes OpenShift's expression generator knows.
var classes = map[byte]string{
	'w': alnum + "_",
	'd': digits,
	'a': alnum,
	'A': "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
}

const (
	digits = "0123456789"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alnum  = digits + lower + upper
)

// segment is one character of the result, drawn from chars, count times.
type segment struct {
	chars string
	count int
}

// Generate makes a value from an expression parameter's "from": literal
// characters, ranges in brackets ("[a-z0-9]") and the classes \w, \d, \a
// and \A, each optionally repeated ("{8}"), as OpenShift's template
// processor does.
func Generate(from string) (string, error) {
	segs, err := parseExpression(from)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, s := range segs {
		for range s.count {
			if len(s.chars) == 1 {
				b.WriteByte(s.chars[0])
				continue
			}
			n, err := rand.Int(rand.Reader, big.NewInt(int64(len(s.chars))))
			if err != nil {
				return "", err
			}
			b.WriteByte(s.chars[n.Int64()])
		}
	}
	return b.String(), nil
}

func parseExpression(from string) ([]segment, error) {
	var segs []segment
	total := 0
	for i := 0; i < len(from); {
		var seg segment
		switch c := from[i]; {
		case c == '[':
			end := strings.IndexByte(from[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("expression %q: %q has no closing ]", from, from[i:])
			}
			chars, err := charRange(from[i+1 : i+end])
			if err != nil {
				return nil, fmt.Errorf("expression %q: %w", from, err)
			}
			seg, i = segment{chars: chars, count: 1}, i+end+1
		case c == '\\' && i+1 < len(from):
			chars, ok := classes[from[i+1]]
			if !ok {
				chars = from[i+1 : i+2]
			}
			seg, i = segment{chars: chars, count: 1}, i+2
		default:
			seg, i = segment{chars: from[i : i+1], count: 1}, i+1
		}
		if i < len(from) && from[i] == '{' {
			end := strings.IndexByte(from[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("expression %q: %q has no closing }", from, from[i:])
			}
			n, err := strconv.Atoi(from[i+1 : i+end])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("expression %q: {%s} is not a positive count", from, from[i+1:i+end])
			}
			seg.count, i = n, i+end+1
		}
		if total += seg.count; total > maxGenerated {
			return nil, fmt.Errorf("expression %q makes more than %d characters", from, maxGenerated)
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// charRange expands a bracket's content ("a-z0-9_") into its characters.
func charRange(spec string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(spec); i++ {
		if i+2 < len(spec) && spec[i+1] == '-' {
			lo, hi := spec[i], spec[i+2]
			if lo > hi {
				return "", fmt.Errorf("range %c-%c is reversed", lo, hi)
			}
			for c := int(lo); c <= int(hi); c++ {
				b.WriteByte(byte(c))
			}
			i += 2
			continue
		}
		if spec[i] == '\\' && i+1 < len(spec) {
			if chars, ok := classes[spec[i+1]]; ok {
				b.WriteString(chars)
				i++
				continue
			}
		}
		b.WriteByte(spec[i])
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("[%s] is empty", spec)
	}
	return b.String(), nil
}
