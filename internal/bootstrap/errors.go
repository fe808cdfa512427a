package bootstrap

import "errors"

var (
	// ErrBadEnv: the launcher's environment is missing a value, does not parse, or is
	// inconsistent (rank outside [0, size), ...). The message names the variable.
	ErrBadEnv = errors.New("bootstrap: bad launcher environment")
	// ErrStartupTimeout: a wait at start-up (reaching the rendezvous, the first exchange) hit
	// its deadline. The message names the launcher detected and the ranks that never arrived.
	ErrStartupTimeout = errors.New("bootstrap: start-up timeout")
	// ErrTimeout: a collective or key-value wait after start-up hit its deadline; the message
	// names the ranks that never arrived.
	ErrTimeout = errors.New("bootstrap: timeout")
	// ErrProtocol: a malformed or unexpected message on the rendezvous or PMI connection.
	ErrProtocol = errors.New("bootstrap: protocol error")
	// ErrRefused: the rendezvous service refused this rank (duplicate rank, size mismatch,
	// job failed).
	ErrRefused = errors.New("bootstrap: refused by rendezvous")
	// ErrPeerLost: a rank failed — its connection to the rendezvous ended before it said
	// goodbye, or it was silent for the failure timeout (*PeerFailure says which rank and how);
	// every later collective fails.
	ErrPeerLost = errors.New("bootstrap: rank lost")
	// ErrClosed: the client or server was closed.
	ErrClosed = errors.New("bootstrap: closed")
	// ErrPMI: the PMI-1 server answered with an error.
	ErrPMI = errors.New("bootstrap: PMI error")
	// ErrAddrInUse: rank 0 must host the rendezvous on a fixed port (the port of GOARMCI_RDV
	// under a launcher other than goarmci run, or Slurm's port derived from the job id) and
	// another process already listens there. The message names the address and what to do.
	ErrAddrInUse = errors.New("bootstrap: rendezvous port in use")
)
