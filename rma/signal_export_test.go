package rma

// PostedSignals is how many barrier signals to network peers this rank has posted and not yet
// reaped (signal.go).
func PostedSignals(r *Runtime) int { return r.sig.n }

// Outstanding is how many operations of this rank to rank p have not completed.
func Outstanding(r *Runtime, p int) int64 { return r.peers[p].outstanding.Load() }
