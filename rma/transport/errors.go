package transport

import "errors"

// Sentinels of the package's errors; every error it returns wraps one of them (errors.Is).
var (
	// ErrBadPeer: a peer index outside [0, peers).
	ErrBadPeer = errors.New("transport: peer out of range")
	// ErrBadTime: an event whose time is earlier than one already seen (time never goes back).
	ErrBadTime = errors.New("transport: time went backwards")
	// ErrBadConfig: a configuration value out of range; the message names the knob.
	ErrBadConfig = errors.New("transport: bad configuration value")
	// ErrBadEvent: a switch event that is not valid in the peer's state (an operation issued
	// while operations are suspended, an id issued twice or completed but never issued, a
	// connection event with no connection under way).
	ErrBadEvent = errors.New("transport: event not valid in this state")
)
