package shellwords

import "errors"

// Split splits s into words: words are separated by blanks; '...' and
// "..." quote, and a backslash escapes the next character (not inside
// '...'). An unterminated quote or escape is an error.
func Split(s string) ([]string, error) {
	var words []string
	var cur []rune
	inWord, escaped := false, false
	var quote rune
	for _, r := range s {
		switch {
		case escaped:
			cur, escaped = append(cur, r), false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur = append(cur, r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words, cur, inWord = append(words, string(cur)), cur[:0], false
			}
		default:
			cur, inWord = append(cur, r), true
		}
	}
	if quote != 0 || escaped {
		return nil, errors.New("unterminated quote or escape")
	}
	if inWord {
		words = append(words, string(cur))
	}
	return words, nil
}
