package rma

import (
	"errors"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv/provider/shm"
)

// Sentinel errors; every error from this package wraps one of them (or a context error, or an
// error of a lower layer for transport failures).
var (
	// ErrBadRank: a target rank outside [0, Size).
	ErrBadRank = errors.New("rma: rank out of range")
	// ErrOutOfRange: an access outside the target's part of the segment, or a buffer too small.
	ErrOutOfRange = errors.New("rma: access out of range")
	// ErrStride: a malformed strided descriptor (more than 8 stride levels, negative counts or
	// strides, strides that make chunks overlap out of the buffer).
	ErrStride = errors.New("rma: bad stride descriptor")
	// ErrBadOp: an unknown read-modify-write or reduction operation.
	ErrBadOp = errors.New("rma: unknown operation")
	// ErrType: an unknown element type, or a length/offset that does not fit the type.
	ErrType = errors.New("rma: bad element type or alignment")
	// ErrFreed: use of a segment after Free, or of mutexes that were not created.
	ErrFreed = errors.New("rma: segment freed or resource not created")
	// ErrFinalized: use of the runtime after Finalize.
	ErrFinalized = errors.New("rma: runtime finalized")
	// ErrTransport: an operation failed in the network (its completion status is in the message).
	ErrTransport = errors.New("rma: transport failure")
	// ErrPartition: no network path to the target existed for longer than the partition
	// timeout (GOARMCI_PARTITION_TIMEOUT, default 30 s); the operation was given up
	// [Vishnu07 §10.3.3].
	ErrPartition = hybridft.ErrPartition
	// ErrNoSpace: shared memory could not be allocated — Init: the shared-memory control file
	// does not fit in its directory (GOARMCI_SHM_DIR, default /dev/shm, is full); Malloc: the
	// segment's memory is refused (memory or cgroup limit). The message names the bytes needed.
	// Allocation happens before the memory is mapped, so this replaces a SIGBUS.
	ErrNoSpace = shm.ErrNoSpace
	// ErrPeerAlloc: another rank could not allocate or register its part of a collective
	// allocation (Malloc); that rank's error says why.
	ErrPeerAlloc = errors.New("rma: another rank could not allocate its part")
	// ErrPeerFailed: the operation needs a rank that failed — its process ended before Finalize
	// (returned or exited early, crashed, was killed), it stayed silent for the failure timeout
	// while its host answered (GOARMCI_FAILURE_TIMEOUT, default 2 s: stopped, hung), or it was
	// unreachable for the partition timeout plus that; the message names the rank and what
	// happened ("rank 1 exited before Finalize"). Returned by operations to that rank, by waits
	// on it (Fence, Lock) and by waits on the whole job (Barrier, AllFence, collectives);
	// operations between surviving ranks keep working. See FailedRanks.
	ErrPeerFailed = errors.New("rma: peer failed")
	// ErrExpelled: this rank itself was declared failed — it was stopped or starved past the
	// failure timeout (GOARMCI_FAILURE_TIMEOUT) and resumed — so the job goes on without it:
	// every later operation of its own returns this, wrapped with ErrPeerFailed naming this rank
	// ("rank 1 silent for the failure timeout (1s): ..."). See failure.go for what its late
	// traffic can and cannot change.
	ErrExpelled = errors.New("rma: this rank was expelled from the job")
	// ErrConfig: a bad configuration value.
	ErrConfig = errors.New("rma: bad configuration")
)
