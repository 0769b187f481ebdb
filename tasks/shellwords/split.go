package shellwords

import "errors"

// Split splits s into words: words are separated by blanks; '...' and
// "..." quote, and a backslash escapes the next character (not inside
// '...'). An unterminated quote or escape is an error.
func Split(s string) ([]string, error) {
	var sp splitter
	for _, r := range s {
		sp.feed(r)
	}
	if sp.quote != 0 || sp.escaped {
		return nil, errors.New("unterminated quote or escape")
	}
	sp.endWord()
	return sp.words, nil
}

// splitter is Split's state between runes.
type splitter struct {
	words           []string
	cur             []rune
	inWord, escaped bool
	quote           rune
}

func (sp *splitter) feed(r rune) {
	switch {
	case sp.escaped:
		sp.cur, sp.escaped = append(sp.cur, r), false
	case r == '\\' && sp.quote != '\'':
		sp.escaped, sp.inWord = true, true
	case sp.quote != 0:
		if r == sp.quote {
			sp.quote = 0
		} else {
			sp.cur = append(sp.cur, r)
		}
	case r == '\'' || r == '"':
		sp.quote, sp.inWord = r, true
	case r == ' ' || r == '\t' || r == '\n':
		sp.endWord()
	default:
		sp.cur, sp.inWord = append(sp.cur, r), true
	}
}

func (sp *splitter) endWord() {
	if sp.inWord {
		sp.words, sp.cur, sp.inWord = append(sp.words, string(sp.cur)), sp.cur[:0], false
	}
}
