package window

// Epochs is the window's live epoch state, for the tests (read-only use: Locked, Idle, ...).
func (w *Window) Epochs() *Epochs { return &w.ep }
