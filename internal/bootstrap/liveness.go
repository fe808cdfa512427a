package bootstrap

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Peer failure detection. Every rank keeps its connection to the rendezvous for the whole job,
// so the rendezvous sees a rank's process end: the kernel closes the connection of a process
// that exits, crashes or is killed (kill -9 included), whatever launched it. A connection that
// closes before its rank said goodbye (Client.Close, called by Finalize) is a failed rank; the
// server tells every other rank (mPeerFailed). Both ends also send a heartbeat (mPing) every
// eighth of the failure timeout T and check every eighth, so a rank that is stopped or hung,
// whose connection stays open, is declared failed once nothing was heard from it for 7T/8:
// within T of its last heartbeat, while a pause shorter than 3T/4 (1.5 s of the default 2 s) is
// never declared. A silent rank whose host does not answer either (its kernel acknowledges no
// heartbeat: TCP_INFO) is cut off by the network, not stopped; the network layer rides out such
// partitions for the partition timeout P (hybridft, GOARMCI_PARTITION_TIMEOUT), so such a rank
// is declared only after P+T (never with P = 0). A client that hears nothing from the
// rendezvous, or whose connection to it drops, declares the rank hosting it failed (rank 0 under
// srun, mpiexec or a given GOARMCI_RDV).
//
// The decisions are made by detector, a pure core (events and the time in, failures out: no
// goroutine, no clock); Server and Client drive it.

// FailReason says how a rank was found failed.
type FailReason uint8

const (
	// FailExited: the rank's connection closed before it said goodbye: its process ended
	// (returned or exited without Finalize, crashed, was killed).
	FailExited FailReason = 1
	// FailSilent: nothing was heard from the rank for the failure timeout while its host
	// answered (stopped, hung).
	FailSilent FailReason = 2
	// FailUnreachable: neither the rank nor its host answered for the partition timeout plus
	// the failure timeout (network partition, host down).
	FailUnreachable FailReason = 3
)

// PeerFailure is the error describing one failed rank, in the user's terms ("rank 1 exited
// (status 3) before Finalize"). errors.Is(err, ErrPeerLost) holds for it.
type PeerFailure struct {
	Rank   int
	Reason FailReason
	// After is the timeout that expired (FailSilent: the failure timeout; FailUnreachable: the
	// partition timeout plus the failure timeout).
	After time.Duration
	// Exit is how the rank's process ended, when its launcher told the rendezvous (goarmci run
	// hosts the rendezvous and waits for its ranks: Server.RankExited); only with FailExited.
	Exit ExitStatus
}

func (e *PeerFailure) Error() string {
	switch e.Reason {
	case FailSilent:
		return fmt.Sprintf("rank %d silent for the failure timeout (%v): stopped or hung before Finalize", e.Rank, e.After)
	case FailUnreachable:
		return fmt.Sprintf("rank %d unreachable for %v (network partition or host down) before Finalize", e.Rank, e.After)
	}
	switch {
	case e.Exit.Signal != 0:
		return fmt.Sprintf("rank %d was killed by %v before Finalize", e.Rank, e.Exit)
	case e.Exit.Known:
		return fmt.Sprintf("rank %d exited (%v) before Finalize", e.Rank, e.Exit)
	}
	return fmt.Sprintf("rank %d exited before Finalize (its rendezvous connection closed)", e.Rank)
}

// ExitStatus is how a rank's process ended, as its launcher's wait(2) saw it. The zero value is
// "unknown" (launchers other than goarmci run do not tell the rendezvous).
type ExitStatus struct {
	Known  bool
	Code   int            // exit status (0-255) when Signal is 0
	Signal syscall.Signal // the signal that killed the process, 0 when it exited
}

// Exited is the status of a process that exited with code.
func Exited(code int) ExitStatus { return ExitStatus{Known: true, Code: code} }

// Killed is the status of a process killed by sig.
func Killed(sig syscall.Signal) ExitStatus { return ExitStatus{Known: true, Signal: sig} }

// String is "status 3", "signal 9 (SIGKILL)" or "unknown status".
func (s ExitStatus) String() string {
	switch {
	case !s.Known:
		return "unknown status"
	case s.Signal != 0:
		if name := unix.SignalName(s.Signal); name != "" {
			return fmt.Sprintf("signal %d (%s)", int(s.Signal), name)
		}
		return fmt.Sprintf("signal %d", int(s.Signal))
	}
	return fmt.Sprintf("status %d", s.Code)
}

// exitWaitBound bounds how long the rendezvous of goarmci run holds back the failure notice of a
// rank whose connection closed, waiting for the launcher to report its exit status: the kernel
// closes a process's sockets as it exits, just before its parent's wait(2) returns, so the status
// follows the close by well under a millisecond unless the launcher is starved.
const exitWaitBound = 100 * time.Millisecond

// exitWait is the pure core deciding when the rendezvous of a launcher that reports exit statuses
// (goarmci run: Server.RankExited) declares a rank whose connection closed before its goodbye: at
// once when its status is known, else when the status arrives or exitWaitBound after the close,
// whichever comes first (the notice then says the connection closed). Holding the notice, rather
// than sending it at once and amending it later, gives every survivor the same, complete message
// in its first error, at a cost of at most the bound in detection time. Time in, decisions out.
type exitWait struct {
	bound    time.Duration
	status   []ExitStatus
	closedAt []time.Time // zero: not waiting
}

func newExitWait(n int, bound time.Duration) *exitWait {
	return &exitWait{bound: bound, status: make([]ExitStatus, n), closedAt: make([]time.Time, n)}
}

// closed records that k's connection closed at now; it reports whether k is to be declared now
// (its status is known), else k waits.
func (w *exitWait) closed(k int, now time.Time) bool {
	if k < 0 || k >= len(w.status) {
		return false
	}
	if w.status[k].Known {
		return true
	}
	w.closedAt[k] = now
	return false
}

// exited records k's exit status; it reports whether k was waiting for it (declare it now).
func (w *exitWait) exited(k int, st ExitStatus) bool {
	if k < 0 || k >= len(w.status) || w.status[k].Known {
		return false
	}
	w.status[k] = st
	if w.closedAt[k].IsZero() {
		return false
	}
	w.closedAt[k] = time.Time{}
	return true
}

// due returns the waiting ranks whose bound has passed at now; they wait no longer.
func (w *exitWait) due(now time.Time) []int {
	var out []int
	for k, at := range w.closedAt {
		if !at.IsZero() && now.Sub(at) >= w.bound {
			w.closedAt[k] = time.Time{}
			out = append(out, k)
		}
	}
	return out
}

// Is makes a PeerFailure match ErrPeerLost.
func (e *PeerFailure) Is(target error) bool { return target == ErrPeerLost }

// memberState is where one member of a detector stands.
type memberState uint8

const (
	msAbsent memberState = iota // not joined yet
	msAlive                     // joined, heard from within the timeout
	msBye                       // said goodbye: its close is clean
	msGone                      // closed cleanly after goodbye
	msFailed                    // declared failed
)

// detector is the pure failure-detection core: the server keeps one member per rank, a client
// one member (the rendezvous). Events and the current time go in, failures come out; each
// member is declared failed at most once, and never after it said goodbye.
type detector struct {
	silence     time.Duration // silence that fails a member whose host answers; 0: only closes do
	unreachable time.Duration // silence that fails a member whose host does not; 0: never
	hostFresh   time.Duration // a host that acknowledged within this answers (two heartbeats)
	timeout     time.Duration // the failure timeout (for the reports)
	state       []memberState
	last        []time.Time // last frame from the member
	hostLast    []time.Time // last acknowledgment from the member's host (its kernel)
}

// declared is one failure decided by tick.
type declared struct {
	k      int
	reason FailReason
	after  time.Duration
}

// newDetector makes a detector of n members for the failure timeout t (0: no heartbeats) and
// the partition timeout p: a member is failed after a silence of t less one heartbeat period
// while its host answers — acknowledged this end's heartbeats within the last two periods — (so
// that, with ticks every period, it is declared at most t after its last heartbeat), or of p+t
// while its host does not either (p = 0: never).
func newDetector(n int, t, p time.Duration) *detector {
	d := &detector{silence: t - heartbeatEvery(t), hostFresh: 2 * heartbeatEvery(t), timeout: t, state: make([]memberState, n),
		last: make([]time.Time, n), hostLast: make([]time.Time, n)}
	if t > 0 && p > 0 {
		d.unreachable = p + t
	}
	return d
}

func (d *detector) ok(k int) bool { return k >= 0 && k < len(d.state) }

// join records that member k connected at now.
func (d *detector) join(k int, now time.Time) {
	if d.ok(k) && d.state[k] == msAbsent {
		d.state[k], d.last[k] = msAlive, now
	}
}

// heard records a frame from member k at now.
func (d *detector) heard(k int, now time.Time) {
	if d.ok(k) && (d.state[k] == msAlive || d.state[k] == msBye) {
		d.last[k] = now
	}
}

// hostHeard records that member k's host acknowledged this end's heartbeats at at (its kernel
// does while the process is stopped; nothing does across a partition).
func (d *detector) hostHeard(k int, at time.Time) {
	if d.ok(k) && at.After(d.hostLast[k]) {
		d.hostLast[k] = at
	}
}

// bye records member k's goodbye: from now on its close is clean and its silence harmless.
func (d *detector) bye(k int) {
	if d.ok(k) && d.state[k] == msAlive {
		d.state[k] = msBye
	}
}

// closed records the end of member k's connection; it reports whether that is a failure (the
// member had joined, had not said goodbye and was not declared failed before).
func (d *detector) closed(k int) (FailReason, bool) {
	if !d.ok(k) {
		return 0, false
	}
	switch d.state[k] {
	case msAlive:
		d.state[k] = msFailed
		return FailExited, true
	case msBye:
		d.state[k] = msGone
	}
	return 0, false
}

// tick returns the members silent for too long at now, declared failed: FailSilent when their
// host still answers, FailUnreachable when it has not either for the longer limit.
func (d *detector) tick(now time.Time) []declared {
	if d.silence <= 0 {
		return nil
	}
	var out []declared
	for k, s := range d.state {
		quiet := now.Sub(d.last[k])
		if s != msAlive || quiet < d.silence {
			continue
		}
		switch {
		case now.Sub(d.hostLast[k]) < d.hostFresh:
			d.state[k] = msFailed
			out = append(out, declared{k, FailSilent, d.timeout})
		case d.unreachable > 0 && quiet >= d.unreachable:
			d.state[k] = msFailed
			out = append(out, declared{k, FailUnreachable, d.unreachable})
		}
	}
	return out
}

// fail declares member k failed by word of another (a client told that the rendezvous' host
// failed); it reports whether k was alive.
func (d *detector) fail(k int) bool {
	if d.ok(k) && d.state[k] == msAlive {
		d.state[k] = msFailed
		return true
	}
	return false
}

// failed reports whether member k was declared failed.
func (d *detector) failed(k int) bool { return d.ok(k) && d.state[k] == msFailed }

// heartbeatEvery is how often each end sends a heartbeat, and checks the other's, for a failure
// timeout of t: eight per timeout, so several late heartbeats never fail a live rank.
func heartbeatEvery(t time.Duration) time.Duration { return t / 8 }

// encodePeerFailed is the payload of mPeerFailed.
func encodePeerFailed(pf *PeerFailure) []byte {
	var e enc
	e.u64(0)
	e.u32(uint32(pf.Rank))
	e.u8(byte(pf.Reason))
	e.u64(uint64(pf.After))
	var known byte
	if pf.Exit.Known {
		known = 1
	}
	e.u8(known)
	e.u32(uint32(pf.Exit.Code))
	e.u8(byte(pf.Exit.Signal))
	return e.b
}

// decodePeerFailed parses mPeerFailed's payload; size bounds the rank.
func decodePeerFailed(p []byte, size int) (*PeerFailure, error) {
	d := dec{b: p}
	d.u64()
	rank, reason, after := d.u32(), d.u8(), d.u64()
	known, code, sig := d.u8(), d.u32(), d.u8()
	if err := d.done(); err != nil {
		return nil, err
	}
	if int64(rank) >= int64(size) || reason < byte(FailExited) || reason > byte(FailUnreachable) || after > 1<<62 ||
		known > 1 || code > 255 || sig > 64 || known == 0 && (code != 0 || sig != 0) {
		return nil, fmt.Errorf("%w: peer failure of rank %d, reason %d, status %d/%d/%d in a job of %d", ErrProtocol,
			rank, reason, known, code, sig, size)
	}
	return &PeerFailure{Rank: int(rank), Reason: FailReason(reason), After: time.Duration(after),
		Exit: ExitStatus{Known: known == 1, Code: int(code), Signal: syscall.Signal(sig)}}, nil
}

// pingPayload is mPing's payload.
var pingPayload = make([]byte, 8)

// hostAckedAt is when the host at the other end of c last acknowledged data (TCP_INFO's
// last_ack_recv), and whether c tells. The kernel acknowledges for a stopped process, not
// across a partition.
func hostAckedAt(c net.Conn, now time.Time) (time.Time, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return time.Time{}, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return time.Time{}, false
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if cerr != nil || err != nil {
		return time.Time{}, false
	}
	return now.Add(-time.Duration(info.Last_ack_recv) * time.Millisecond), true
}
