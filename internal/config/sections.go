package config

import (
	"io"
	"sort"
	"sync"
)

// Section is one part of `goarmci info`'s report contributed by another package (a provider
// listing its devices and ports, multirail listing its rails, ...). Write prints the section's
// body; the title is printed by the caller.
type Section struct {
	Title string
	Order int // sections print in ascending Order, then by Title
	Write func(w io.Writer, c *Config) error
}

var (
	sectionsMu sync.Mutex
	sections   []Section
)

// RegisterSection adds a section to `goarmci info` (typically from an init function; the
// registering package must be linked into cmd/goarmci). A section with the same Title
// replaces the earlier one.
func RegisterSection(s Section) {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	for i := range sections {
		if sections[i].Title == s.Title {
			sections[i] = s
			return
		}
	}
	sections = append(sections, s)
}

// Sections returns the registered sections in print order.
func Sections() []Section {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	out := append([]Section(nil), sections...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Title < out[j].Title
	})
	return out
}
