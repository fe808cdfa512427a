package rma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
)

// The gather + multicast barrier ("RGM", [Kini03 §3.3]) and the message-passing baselines
// (BarrierMessage, BarrierMessagePairwise), all on a UD queue pair every rank opens at Init on its network device.
//
// RGM: arrivals are gathered up a tree of fan-in k (GOARMCI_BARRIER_FANIN, default 7, the
// paper's best) with 8-byte atomic swaps of the barrier id into flag words, as the other RDMA
// algorithms; rank 0, the root, then releases every rank with one UD multicast datagram that
// carries the barrier id, sent to a multicast group of the job that every rank's UD queue pair
// joined at Init ([IBA] §10.5; ibv.QP.AttachMcast). The datagram is unreliable: a rank that has
// not seen the release within rgmNakFirst (doubling up to rgmNakMax) asks again — a NAK — by
// reading, with a one-sided RDMA atomic, the release word of its parent in the tree (the first
// time) or of the root (after that). Every rank stores into its own release word the id of the
// last barrier it knows released, the root before it multicasts, so a NAK needs no action of
// the asked rank's CPU and is answered even after that rank has left the barrier.
//
// Without multicast on every rank (the tcp provider, a shared-memory-only job) RGM releases by a
// tree of fan-in k instead: each released rank writes the barrier id into the release word of
// its children ("gather + tree broadcast"; Runtime.Multicast reports which).
//
// BarrierMessage is the central-coordinator barrier of two-sided messages, the kind of
// message-passing barrier [Kini03 §5] measures the RDMA barriers against: every rank sends an
// ARRIVE datagram to rank 0 and waits for its RELEASE datagram; rank 0 waits for the n−1
// arrivals, then sends n−1 releases. Lost datagrams: a waiting rank resends its ARRIVE after a
// timeout, rank 0 answers an ARRIVE of a barrier it has already released with another RELEASE,
// and a rank whose RELEASE was lost learns the release from rank 0's release word (a NAK, as
// RGM's).
//
// BarrierMessagePairwise is the pairwise exchange of BarrierPairwise over the same datagrams
// (MPICH's MPI_Barrier of send/receive pairs, "MPI-PE", [Kini03 §5]'s baseline); lost datagrams
// are resent (messagePairwiseBarrier).

// Flag words of RGM in the system segment: the children's gather words are those of the
// gather-broadcast barrier, extended to 15 children (words 48..62; word 63 is that barrier's
// release), and word 47 is a rank's release word. Every write of barrier id i to a word lands
// before barrier i completes for any rank, so the values only grow ([Kini03 §4]).
const (
	rgmReleaseSlot = 47
	rgmMaxFanIn    = 15
)

// NAK timing of RGM and BarrierMessage: the first wait, and the cap of its doubling.
const (
	rgmNakFirst = time.Millisecond
	rgmNakMax   = 64 * time.Millisecond
)

// Barrier datagrams (16 bytes): kind, barrier id (8 bytes), sender rank (4 bytes), all
// little-endian; a pairwise exchange's (msgExchange) also carries its slot (byte 13: peExtraSlot,
// peReleaseSlot, or peRoundSlot + round).
const (
	msgArrive   = 1
	msgRelease  = 2
	msgExchange = 3
	msgLen      = 16
)

// Slots of BarrierMessagePairwise's datagrams, as the flag words of BarrierPairwise: each has one
// sender per job size, so the barrier ids received in it only grow. A rank also stores the last
// id it sent in a slot into its flag word peSentWord + slot, where a partner whose datagram was
// lost reads it (a NAK). Words 16..31 are free of dissemination rounds for jobs of at most 2^14
// ranks, the most pairwise exchange takes.
const (
	peExtraSlot   = 0 // from rank me+P (an extra rank) to its partner me < N-P
	peReleaseSlot = 1 // from rank me-P to the extra rank me
	peRoundSlot   = 2 // + round k, from me XOR 2^k
	peSlots       = peRoundSlot + pairwiseMaxRounds
	peSentWord    = 16
)

// barrierQP is this rank's UD queue pair for barriers, and what it knows of the others'.
type barrierQP struct {
	dev    *ibv.Context
	pd     *ibv.PD
	cq     *ibv.CQ
	qp     *ibv.QP
	rbuf   *ibv.MR // receive slots of msgSlot bytes
	nrecv  int
	qkey   uint32
	mcast  bool // every rank attached to the job's group
	mgid   ibv.GID
	mlid   uint16
	mcAH   *ibv.AH
	qpns   []uint32
	addrs  []ibv.AHAttr
	ahs    []*ibv.AH       // unicast, created on first use
	arrive []uint64        // rank 0 (BarrierMessage): the last barrier id each rank arrived at
	peRecv [peSlots]uint64 // BarrierMessagePairwise: the last barrier id received in each slot
	naks   uint64          // NAKs this rank sent (statistics, tests)
}

const msgSlot = 64

// jobGroup is the job's multicast group: an MGID in the site-local scope (ff15::/16, the
// "goarmci" prefix, then a hash of the job name) and an MLID in 0xC000..0xFFFE from the same
// hash, and the Q_Key of the barrier queue pairs.
func jobGroup(job string) (ibv.GID, uint16, uint32) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(job))
	v := h.Sum64()
	g := ibv.GID{0xff, 0x15, 'g', 'o', 'a', 'r', 'm', 'c', 'i'}
	binary.BigEndian.PutUint64(g[8:], v)
	lid := ibv.MulticastLIDMin + uint16(v%uint64(ibv.MulticastLIDMax-ibv.MulticastLIDMin+1))
	return g, lid, 0x0b000000 | uint32(v>>40)&0xffffff
}

// setupBarrierQP opens the barrier queue pair at Init (collective over the ranks with a network
// device, i.e. all of them when any): a UD queue pair on port 1 of the network device with
// receives posted, attached to the job's multicast group when the device carries multicast,
// and an exchange of queue pair numbers, addresses and multicast success. Failures are no
// errors: without the queue pair on every rank, RGM falls back to its tree release and
// BarrierMessage is refused; without multicast on every rank, RGM uses the tree release.
func (r *Runtime) setupBarrierQP(ctx context.Context) error {
	n := r.netOf(TransportTCP)
	if n == nil {
		return nil // a job without a network (every rank agrees: the device exchange)
	}
	dev := n.dev
	bq, err := r.openBarrierQP(dev)
	if err != nil {
		r.log.Debug().Err(err).Msg("rma: no barrier queue pair: RGM releases by a tree, no message barrier")
		bq = nil
	}
	info := []byte{0}
	if bq != nil {
		info = append(info, 1) // has a queue pair
		if bq.mcast {
			info[0] = 1
		}
		pa, _ := dev.QueryPort(1)
		info = binary.LittleEndian.AppendUint32(info, bq.qp.Num())
		info = binary.LittleEndian.AppendUint16(info, pa.LID)
		info = append(info, pa.Addr...)
	}
	all, err := r.boot.AllGather(ctx, info)
	if err != nil {
		if bq != nil {
			bq.close()
		}
		return fmt.Errorf("barrier queue pairs: %w", err)
	}
	ok, mc := bq != nil, bq != nil && bq.mcast
	for _, b := range all {
		if len(b) < 8 || b[1] != 1 {
			ok, mc = false, false
			continue
		}
		mc = mc && b[0] == 1
	}
	if !ok {
		if bq != nil {
			bq.close()
		}
		r.log.Debug().Msg("rma: some rank has no barrier queue pair: RGM releases by a tree, no message barrier")
		return nil
	}
	bq.qpns, bq.addrs, bq.ahs = make([]uint32, r.size), make([]ibv.AHAttr, r.size), make([]*ibv.AH, r.size)
	for p, b := range all {
		bq.qpns[p] = binary.LittleEndian.Uint32(b[2:6])
		bq.addrs[p] = ibv.AHAttr{DLID: binary.LittleEndian.Uint16(b[6:8]), Addr: string(b[8:]), PortNum: 1}
	}
	if bq.mcast && !mc {
		_ = bq.qp.DetachMcast(bq.mgid, bq.mlid)
	}
	bq.mcast = mc
	if mc {
		if bq.mcAH, err = bq.pd.CreateAH(ibv.AHAttr{DLID: bq.mlid, DGID: bq.mgid, PortNum: 1}); err != nil {
			bq.mcast = false
		}
	}
	if !bq.mcast {
		r.log.Debug().Msg("rma: no multicast on every rank: RGM releases by a tree of RDMA writes (gather + tree broadcast)")
	}
	if r.rank == 0 {
		bq.arrive = make([]uint64, r.size)
	}
	r.bq = bq
	r.closers = append(r.closers, func() error { bq.close(); return nil }) // before the device closes
	return nil
}

func (r *Runtime) openBarrierQP(dev *ibv.Context) (_ *barrierQP, err error) {
	bq := &barrierQP{dev: dev, nrecv: 2*r.size + 64}
	bq.mgid, bq.mlid, bq.qkey = jobGroup(r.cfg.Job)
	defer func() {
		if err != nil {
			bq.close()
		}
	}()
	if bq.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if bq.cq, err = dev.CreateCQ(2*bq.nrecv + 256); err != nil {
		return nil, err
	}
	if bq.qp, err = bq.pd.CreateQP(ibv.QPInitAttr{Type: ibv.UD, SendCQ: bq.cq, RecvCQ: bq.cq, SigAll: true,
		Cap: ibv.QPCap{MaxSendWR: r.size + 64, MaxRecvWR: bq.nrecv, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	if err = bq.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, QKey: bq.qkey}, ibv.AttrState|ibv.AttrPort|ibv.AttrQKey); err != nil {
		return nil, err
	}
	if err = bq.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState); err != nil {
		return nil, err
	}
	if err = bq.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1}, ibv.AttrState|ibv.AttrSQPSN); err != nil {
		return nil, err
	}
	if bq.rbuf, err = bq.pd.RegMR(make([]byte, msgSlot*bq.nrecv), ibv.AccessLocalWrite); err != nil {
		return nil, err
	}
	for i := 0; i < bq.nrecv; i++ {
		if err = bq.repost(i); err != nil {
			return nil, err
		}
	}
	if dev.QueryDevice().MaxMcastGrp > 0 {
		bq.mcast = bq.qp.AttachMcast(bq.mgid, bq.mlid) == nil
	}
	return bq, nil
}

func (bq *barrierQP) repost(slot int) error {
	return bq.qp.PostRecv(&ibv.RecvWR{ID: uint64(slot), SGL: []ibv.SGE{bq.rbuf.SGE(msgSlot*slot, msgSlot)}})
}

func (bq *barrierQP) close() {
	if bq.qp != nil {
		_ = bq.qp.Destroy() // its attachment ends with it
	}
	if bq.rbuf != nil {
		_ = bq.rbuf.Dereg()
	}
	if bq.cq != nil {
		_ = bq.cq.Destroy()
	}
	if bq.pd != nil {
		_ = bq.pd.Dealloc()
	}
}

// Multicast reports whether the ranks' barrier queue pairs share a multicast group: RGM then
// releases with one multicast datagram, else with a tree of RDMA writes.
func (r *Runtime) Multicast() bool { return r.bq != nil && r.bq.mcast }

// BarrierNAKs is the number of NAKs this rank has sent (RGM and BarrierMessage releases asked
// for again after a lost datagram).
func (r *Runtime) BarrierNAKs() uint64 {
	if r.bq == nil {
		return 0
	}
	return r.bq.naks
}

// releaseWord is this rank's release word.
func (r *Runtime) releaseWord() []byte { return r.sys.local[8*rgmReleaseSlot : 8*rgmReleaseSlot+8] }

// noteRelease raises this rank's release word to id.
func (r *Runtime) noteRelease(id uint64) {
	w := r.releaseWord()
	if v, _ := accum.Load64(w); v < id {
		_ = accum.Store64(w, id) // only this rank raises its word (a tree parent writes the same id)
	}
}

func (r *Runtime) released(id uint64) bool {
	v, _ := accum.Load64(r.releaseWord())
	return v >= id
}

// drain handles the barrier datagrams received so far: a RELEASE raises the release word, an
// ARRIVE at rank 0 is recorded (and answered with another RELEASE when its barrier was released
// already: the first one was lost). Malformed datagrams are dropped.
func (r *Runtime) drain() {
	bq := r.bq
	var wcs [32]ibv.WC
	for {
		k := bq.cq.Poll(wcs[:])
		for _, wc := range wcs[:k] {
			if wc.Opcode != ibv.WCRecv {
				continue // a send's completion
			}
			slot := int(wc.WRID)
			if slot < 0 || slot >= bq.nrecv {
				continue
			}
			if wc.Status == ibv.WCSuccess && wc.ByteLen >= msgLen {
				m := bq.rbuf.Buf()[msgSlot*slot : msgSlot*slot+msgLen]
				id, from := binary.LittleEndian.Uint64(m[1:9]), int(binary.LittleEndian.Uint32(m[9:13]))
				switch {
				case m[0] == msgRelease:
					r.noteRelease(id)
				case m[0] == msgArrive && bq.arrive != nil && from > 0 && from < r.size:
					bq.arrive[from] = max(bq.arrive[from], id)
					if r.released(id) {
						_ = r.sendMsg(from, msgRelease, id)
					}
				case m[0] == msgExchange && int(m[13]) < peSlots:
					bq.peRecv[m[13]] = max(bq.peRecv[m[13]], id)
				}
			}
			if wc.Status != ibv.WCWRFlushErr {
				if err := bq.repost(slot); err != nil {
					r.log.Debug().Err(err).Msg("rma: barrier receive")
				}
			}
		}
		if k < len(wcs) {
			return
		}
	}
}

// sendMsg sends a barrier datagram to rank to (unicast).
func (r *Runtime) sendMsg(to int, kind byte, id uint64) error {
	return r.sendMsgSlot(to, kind, 0, id)
}

// sendMsgSlot is sendMsg with a pairwise exchange's slot.
func (r *Runtime) sendMsgSlot(to int, kind, slot byte, id uint64) error {
	bq := r.bq
	if bq.ahs[to] == nil {
		ah, err := bq.pd.CreateAH(bq.addrs[to])
		if err != nil {
			return fmt.Errorf("rma: barrier datagram to rank %d: %w", to, err)
		}
		bq.ahs[to] = ah
	}
	return r.postMsgSlot(bq.ahs[to], bq.qpns[to], kind, slot, id)
}

func (r *Runtime) postMsg(ah *ibv.AH, qpn uint32, kind byte, id uint64) error {
	return r.postMsgSlot(ah, qpn, kind, 0, id)
}

func (r *Runtime) postMsgSlot(ah *ibv.AH, qpn uint32, kind, slot byte, id uint64) error {
	m := make([]byte, msgLen)
	m[0] = kind
	binary.LittleEndian.PutUint64(m[1:], id)
	binary.LittleEndian.PutUint32(m[9:], uint32(r.rank))
	m[13] = slot
	if err := r.bq.qp.PostSend(&ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: m, AH: ah, RemoteQPN: qpn, QKey: r.bq.qkey}); err != nil {
		return fmt.Errorf("rma: barrier datagram: %w", err)
	}
	return nil
}

// awaitRelease waits until this rank knows barrier id released: by a datagram (drained here),
// by a parent's write into its release word, or by a NAK: after each timeout it reads the
// release word of ask(attempt) with an RDMA atomic (and calls resend first when not nil). It
// ends with ErrPeerFailed when some rank failed, or with the NAK's error (ErrPartition when the
// asked rank is cut off).
func (r *Runtime) awaitRelease(ctx context.Context, id uint64, ask func(attempt int) int, resend func() error) error {
	cond := func() bool {
		if r.bq != nil {
			r.drain()
		}
		return r.released(id) || r.anyFailedErr() != nil
	}
	timeout := rgmNakFirst
	for attempt := 0; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err := r.pollUntil(wctx, cond)
		cancel()
		if r.released(id) {
			return nil
		}
		if err := r.anyFailedErr(); err != nil {
			return err
		}
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if resend != nil {
			if err := resend(); err != nil {
				return err
			}
		}
		to := ask(attempt)
		if r.bq != nil {
			r.bq.naks++
		}
		v, err := r.atomicOp(ctx, ibv.OpAtomicFetchAdd, r.sys, to, 8*rgmReleaseSlot, 0, 0)
		if err != nil {
			return fmt.Errorf("asking rank %d for the release: %w", to, err)
		}
		if v >= id {
			r.noteRelease(id)
			return nil
		}
		timeout = min(2*timeout, rgmNakMax)
	}
}

// rgmBarrier is BarrierRGM for barrier id (see the top of the file).
func (r *Runtime) rgmBarrier(ctx context.Context, id uint64) error {
	n, me, k := r.size, r.rank, r.fanIn()
	for c := 0; c < k && k*me+1+c < n; c++ {
		if err := r.await(ctx, gatherChildSlot+c, id, k*me+1+c); err != nil {
			return fmt.Errorf("rma: rgm barrier: waiting for rank %d: %w", k*me+1+c, err)
		}
	}
	parent := (me - 1) / k
	if me != 0 {
		if err := r.signal(ctx, parent, gatherChildSlot+(me-1)%k, id); err != nil {
			return fmt.Errorf("rma: rgm barrier: report to rank %d: %w", parent, err)
		}
		var err error
		if r.Multicast() {
			err = r.awaitRelease(ctx, id, func(attempt int) int {
				if attempt == 0 {
					return parent
				}
				return 0
			}, nil)
		} else {
			err = r.await(ctx, rgmReleaseSlot, id, parent)
		}
		if err != nil {
			return fmt.Errorf("rma: rgm barrier: release: %w", err)
		}
	}
	r.noteRelease(id)
	if r.Multicast() {
		if me == 0 {
			if err := r.postMsg(r.bq.mcAH, ibv.MulticastQPN, msgRelease, id); err != nil {
				return fmt.Errorf("rma: rgm barrier: %w", err)
			}
		}
		return nil
	}
	// gather + tree broadcast: release my children
	for c := 0; c < k && k*me+1+c < n; c++ {
		if err := r.signal(ctx, k*me+1+c, rgmReleaseSlot, id); err != nil {
			return fmt.Errorf("rma: rgm barrier: release of rank %d: %w", k*me+1+c, err)
		}
	}
	return nil
}

// fanIn is GOARMCI_BARRIER_FANIN, within 2..rgmMaxFanIn.
func (r *Runtime) fanIn() int {
	k := r.cfg.env.cfg.BarrierFanIn
	if k < 2 || k > rgmMaxFanIn {
		k = gatherFanIn
	}
	return k
}

// errNoBarrierQP: BarrierMessage needs every rank's barrier queue pair.
var errNoBarrierQP = errors.New("the message barrier needs a UD queue pair on every rank's network device")

// members are the ranks taking part in a barrier of a subset of the job (the nodes' leaders of
// BarrierHierarchical), ascending, the first one rank 0 (the central barrier's root, which
// holds the arrival counts and the release word NAKs read); nil means every rank.
type members []int

func (m members) len(size int) int {
	if m == nil {
		return size
	}
	return len(m)
}

func (m members) rank(i int) int {
	if m == nil {
		return i
	}
	return m[i]
}

// messageBarrier is BarrierMessage for barrier id among ms (see the top of the file); this
// rank is ms.rank(me).
func (r *Runtime) messageBarrier(ctx context.Context, id uint64, ms members, me int) error {
	bq := r.bq
	if me != 0 {
		arrive := func() error {
			if err := r.sendMsg(0, msgArrive, id); err != nil {
				return fmt.Errorf("rma: message barrier: %w", err)
			}
			return nil
		}
		if err := arrive(); err != nil {
			return err
		}
		if err := r.awaitRelease(ctx, id, func(int) int { return 0 }, arrive); err != nil {
			return fmt.Errorf("rma: message barrier: release: %w", err)
		}
		return nil
	}
	n := ms.len(r.size)
	missing := func() int {
		for i := 1; i < n; i++ {
			if p := ms.rank(i); bq.arrive[p] < id {
				return p
			}
		}
		return -1
	}
	err := r.pollUntilProbe(ctx, func() bool {
		r.drain()
		return missing() < 0 || r.anyFailedErr() != nil
	}, func() error {
		if p := missing(); p > 0 {
			return r.liveness(ctx, p)()
		}
		return nil
	})
	if err == nil && missing() >= 0 {
		err = r.anyFailedErr()
	}
	if err != nil {
		return fmt.Errorf("rma: message barrier: waiting for rank %d: %w", missing(), err)
	}
	r.noteRelease(id)
	for i := 1; i < n; i++ {
		if err := r.sendMsg(ms.rank(i), msgRelease, id); err != nil {
			return fmt.Errorf("rma: message barrier: %w", err)
		}
	}
	return nil
}

// messagePairwiseBarrier is BarrierMessagePairwise for barrier id among ms, this rank being
// ms.rank(me): the rounds of pairwiseBarrier (the extra members beyond the largest power of two
// P report to me-P first and are released by it last), each a datagram to the partner and a
// wait for the partner's. A rank whose partner's datagram has not come within rgmNakFirst
// (doubling up to rgmNakMax) reads the id the partner last sent in that slot from its flag word
// (a NAK by a one-sided read, as RGM's, answered even after the partner has moved on).
func (r *Runtime) messagePairwiseBarrier(ctx context.Context, id uint64, ms members, me int) error {
	n := ms.len(r.size)
	p := 1 << (bits.Len(uint(n)) - 1)
	if me >= p {
		if err := r.exchange(ctx, ms.rank(me-p), peExtraSlot, peReleaseSlot, id); err != nil {
			return fmt.Errorf("rma: message-pairwise barrier: %w", err)
		}
		return nil
	}
	if me < n-p {
		if err := r.awaitExchange(ctx, peExtraSlot, id, ms.rank(me+p)); err != nil {
			return fmt.Errorf("rma: message-pairwise barrier: waiting for rank %d: %w", ms.rank(me+p), err)
		}
	}
	for k := 0; 1<<k < p; k++ {
		if err := r.exchange(ctx, ms.rank(me^(1<<k)), peRoundSlot+k, peRoundSlot+k, id); err != nil {
			return fmt.Errorf("rma: message-pairwise barrier: round %d: %w", k, err)
		}
	}
	if me < n-p {
		if err := r.sendExchange(ms.rank(me+p), peReleaseSlot, id); err != nil {
			return fmt.Errorf("rma: message-pairwise barrier: %w", err)
		}
	}
	return nil
}

// exchange sends id to rank to in slot out and waits for to's datagram in slot in.
func (r *Runtime) exchange(ctx context.Context, to, out, in int, id uint64) error {
	if err := r.sendExchange(to, out, id); err != nil {
		return err
	}
	return r.awaitExchange(ctx, in, id, to)
}

// sendExchange notes id in this rank's word of slot, then sends it to rank to.
func (r *Runtime) sendExchange(to, slot int, id uint64) error {
	w := r.sys.local[8*(peSentWord+slot) : 8*(peSentWord+slot)+8]
	if v, _ := accum.Load64(w); v < id {
		_ = accum.Store64(w, id) // only this rank writes its words
	}
	return r.sendMsgSlot(to, msgExchange, byte(slot), id)
}

// awaitExchange waits until slot holds id or more: it drains the barrier datagrams, probes rank
// from while the wait is long (ErrPartition when it is cut off), ends with ErrPeerFailed when
// some rank failed, and after each timeout reads from's word of the slot (a NAK).
func (r *Runtime) awaitExchange(ctx context.Context, slot int, id uint64, from int) error {
	bq := r.bq
	cond := func() bool {
		r.drain()
		return bq.peRecv[slot] >= id || r.anyFailedErr() != nil
	}
	probe := r.liveness(ctx, from)
	timeout := rgmNakFirst
	for {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err := r.pollUntilProbe(wctx, cond, probe)
		expired := wctx.Err() != nil
		cancel()
		switch {
		case bq.peRecv[slot] >= id:
			return nil
		case r.anyFailedErr() != nil:
			return r.anyFailedErr()
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !expired:
			return err // the probe's
		}
		bq.naks++
		v, err := r.atomicOp(ctx, ibv.OpAtomicFetchAdd, r.sys, from, 8*(peSentWord+slot), 0, 0)
		if err != nil {
			return fmt.Errorf("asking rank %d for its datagram: %w", from, err)
		}
		bq.peRecv[slot] = max(bq.peRecv[slot], v)
		timeout = min(2*timeout, rgmNakMax)
	}
}
