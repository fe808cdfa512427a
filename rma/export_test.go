package rma

import (
	"io"
	"sync"

	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/multirail"
)

// HasView reports whether this rank holds a load/store view of proc's part of s (direct.go).
func (s *Segment) HasView(proc int) bool {
	if proc < 0 || proc >= len(s.views) {
		return false
	}
	v := s.views[proc].Load()
	return v != nil && v != noView
}

// realAllocs keeps each network's allocator while FailAlloc replaces it.
var realAllocs sync.Map // *network → func(int) ([]byte, func() error, error)

// FailAlloc makes this rank's segment allocations fail with err (nil: allocate again).
func (r *Runtime) FailAlloc(err error) {
	for _, nw := range r.nets {
		if nw.alloc == nil {
			continue
		}
		real, _ := realAllocs.LoadOrStore(nw, nw.alloc)
		if err == nil {
			nw.alloc = real.(func(int) ([]byte, func() error, error))
			continue
		}
		nw.alloc = func(int) ([]byte, func() error, error) { return nil, nil, err }
	}
}

// Channel is the multirail channel to network peer p (channel), for the tests that look at its
// subchannels.
func (r *Runtime) Channel(p int) *multirail.Channel { return r.channel(p) }

// WriteStats writes the Finalize statistics record as GOARMCI_STATS would (json or text).
func (r *Runtime) WriteStats(w io.Writer, json bool) {
	r.cfg.env.cfg.StatsFormat = config.StatsText
	if json {
		r.cfg.env.cfg.StatsFormat = config.StatsJSON
	}
	r.writeStats(w)
}
