package rma

// HasView reports whether this rank holds a load/store view of proc's part of s (direct.go).
func (s *Segment) HasView(proc int) bool {
	if proc < 0 || proc >= len(s.views) {
		return false
	}
	v := s.views[proc].Load()
	return v != nil && v != noView
}
