package npb

import (
	"errors"
	"fmt"
	"strings"
)

// ErrClass is returned for a benchmark class this implementation has no parameters for.
var ErrClass = errors.New("npb: unknown benchmark class")

// Class is an NPB problem class: 'S', 'W', 'A', 'B', ...
type Class byte

// Problem classes.
const (
	ClassS Class = 'S'
	ClassW Class = 'W'
	ClassA Class = 'A'
	ClassB Class = 'B'
)

// String returns the class letter.
func (c Class) String() string { return string(rune(c)) }

// ParseClass parses "S", "W", "A" or "B" (case-insensitive). Other inputs return ErrClass.
func ParseClass(s string) (Class, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) == 1 {
		switch c := Class(s[0]); c {
		case ClassS, ClassW, ClassA, ClassB:
			return c, nil
		}
	}
	return 0, fmt.Errorf("%q (want S, W, A or B): %w", s, ErrClass)
}
