// Package provider is the provider-facing side of package ibv, as database/sql/driver is of
// database/sql: what a verbs provider (ibv/provider/shm, tcp, udp, the transport engine, the
// in-process fabric, hybridft's software recovery) calls to run the verbs objects the user
// holds, and a verbs user never does. A provider implements ibv.Driver and ibv.QPDriver (and
// optionally ibv.SRQCreator, ibv.DirectMapper, ibv.SyncPoster), wraps its driver into a device
// with NewContext, and reports work through the objects: completions with Push, asynchronous
// events with PostEvent, its own QP state changes with SetState, SetArmed and MigrateAuto
// (the QP and APM state machines of [Vishnu07 §2.2]; IBA vol. 1 ch. 10–11). The responder's
// and requester's memory checks (RemoteSlice, LocalSlices, LocalBuffers) are the generic key
// tables' checks, shared by every provider.
//
// The functions are ibv's own, handed over at initialization (ibv/internal/hook); a call costs
// one indirect call, no assertion.
package provider

import (
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/internal/hook"
)

var (
	newContext   = hook.NewContext.(func(ibv.Driver) *ibv.Context)
	deviceDriver = hook.DeviceDriver.(func(*ibv.Context) ibv.Driver)
	qpDriver     = hook.QPDriver.(func(*ibv.QP) ibv.QPDriver)
	srqDriver    = hook.SRQDriver.(func(*ibv.SRQ) ibv.SRQDriver)
	closed       = hook.Closed.(func(*ibv.Context) bool)
	postEvent    = hook.PostEvent.(func(*ibv.Context, ibv.AsyncEvent))
	push         = hook.Push.(func(*ibv.CQ, ibv.WC) bool)
	setState     = hook.SetState.(func(*ibv.QP, ibv.QPState, ibv.AsyncEvent))
	setArmed     = hook.SetArmed.(func(*ibv.QP, bool, string))
	migrateAuto  = hook.MigrateAuto.(func(*ibv.QP, string) (ibv.AHAttr, bool))
	lookupLKey   = hook.LookupLKey.(func(*ibv.Context, uint32) *ibv.MR)
	lookupRKey   = hook.LookupRKey.(func(*ibv.Context, uint32) *ibv.MR)
	lookupQP     = hook.LookupQP.(func(*ibv.Context, uint32) *ibv.QP)
	remoteSlice  = hook.RemoteSlice.(func(*ibv.Context, *ibv.PD, uint32, uint64, uint64, ibv.Access) ([]byte, ibv.WCStatus))
	localSlices  = hook.LocalSlices.(func(*ibv.Context, *ibv.PD, []ibv.SGE, bool, [][]byte) ([][]byte, ibv.WCStatus))
	localBuffers = hook.LocalBuffers.(func(*ibv.Context, *ibv.PD, *ibv.SendWR, bool, [][]byte) ([][]byte, ibv.WCStatus))
)

// NewContext wraps a provider's driver into a device context (what the provider's Open returns:
// its ibv_open_device).
func NewContext(drv ibv.Driver) *ibv.Context { return newContext(drv) }

// DeviceDriver is the provider side of device c: the ibv.Driver it was created with.
func DeviceDriver(c *ibv.Context) ibv.Driver { return deviceDriver(c) }

// QPDriver is the provider side of qp: the ibv.QPDriver its device's CreateQP returned.
func QPDriver(qp *ibv.QP) ibv.QPDriver { return qpDriver(qp) }

// SRQDriver is the provider side of s: the ibv.SRQDriver its device's CreateSRQ returned.
func SRQDriver(s *ibv.SRQ) ibv.SRQDriver { return srqDriver(s) }

// Closed reports whether device c was closed (ibv.Context.Close was called).
func Closed(c *ibv.Context) bool { return closed(c) }

// PostEvent queues an asynchronous event on device c, for ibv.Context.GetAsyncEvent
// (ibv_get_async_event).
func PostEvent(c *ibv.Context, ev ibv.AsyncEvent) { postEvent(c, ev) }

// Push adds completion wc to cq, for ibv.CQ.Poll and ibv.CQ.Wait. When the CQ is full the
// completion is dropped, the CQ is marked overrun (ibv.CQ.Overrun) and an ibv.EventCQErr is
// posted, as hardware does; Push then returns false.
func Push(cq *ibv.CQ, wc ibv.WC) bool { return push(cq, wc) }

// SetState is the provider's own state change of qp (e.g. RTS→ERROR after retries are
// exhausted, SQD drained); it posts ev, with ev.QPNum set to qp's number, when ev.Type is
// non-zero.
func SetState(qp *ibv.QP, s ibv.QPState, ev ibv.AsyncEvent) { setState(qp, s, ev) }

// SetArmed is the provider's REARM→ARMED of qp (the alternate path is loaded). With ok false the
// load failed: the QP stays in REARM and ibv.EventPathMigErr is posted with detail. A QP not in
// REARM is left alone.
func SetArmed(qp *ibv.QP, ok bool, detail string) { setArmed(qp, ok, detail) }

// MigrateAuto is the provider's automatic path migration of qp (ARMED→MIGRATED on a fault of
// the primary path, [Vishnu07 ch. 9]): the alternate path becomes primary and ibv.EventPathMig
// is posted with detail. It returns the new primary path, or false when the QP was not ARMED
// (then the provider must move the QP to ERROR).
func MigrateAuto(qp *ibv.QP, detail string) (ibv.AHAttr, bool) { return migrateAuto(qp, detail) }

// LookupLKey returns the live or dead MR of device c with local key k, or nil.
func LookupLKey(c *ibv.Context, k uint32) *ibv.MR { return lookupLKey(c, k) }

// LookupRKey returns the MR of device c with remote key k, or nil.
func LookupRKey(c *ibv.Context, k uint32) *ibv.MR { return lookupRKey(c, k) }

// LookupQP returns the QP of device c with number qpn, or nil.
func LookupQP(c *ibv.Context, qpn uint32) *ibv.QP { return lookupQP(c, qpn) }

// RemoteSlice is the responder's check of an incoming RDMA or atomic request on device c (IBA
// §9.7.4.1.5, "memory access validation"): rkey must name a live MR of pd (any PD when pd is
// nil) whose access flags include need, and the n bytes at virtual address addr must lie inside
// it. It returns those bytes, or ibv.WCRemAccessErr.
func RemoteSlice(c *ibv.Context, pd *ibv.PD, rkey uint32, addr, n uint64, need ibv.Access) ([]byte, ibv.WCStatus) {
	return remoteSlice(c, pd, rkey, addr, n, need)
}

// LocalSlices resolves a scatter/gather list to memory of device c: every SGE's lkey must name a
// live MR of pd (any PD when pd is nil; with ibv.AccessLocalWrite when write is set) and the
// SGE lie inside it; otherwise ibv.WCLocProtErr. The slices are appended to dst.
func LocalSlices(c *ibv.Context, pd *ibv.PD, sgl []ibv.SGE, write bool, dst [][]byte) ([][]byte, ibv.WCStatus) {
	return localSlices(c, pd, sgl, write, dst)
}

// LocalBuffers resolves a send work request's local buffer: wr.LocalBuf as is, or its SGL
// through LocalSlices; the buffers are appended to dst.
func LocalBuffers(c *ibv.Context, pd *ibv.PD, wr *ibv.SendWR, write bool, dst [][]byte) ([][]byte, ibv.WCStatus) {
	return localBuffers(c, pd, wr, write, dst)
}

// WCOpcodeOf maps a send opcode to the opcode its completion reports (enum ibv_wc_opcode: every
// extended atomic and the accumulate report ibv.WCAtomicExt).
func WCOpcodeOf(o ibv.Opcode) ibv.WCOpcode {
	switch o {
	case ibv.OpSend, ibv.OpSendImm:
		return ibv.WCSend
	case ibv.OpRDMAWrite, ibv.OpRDMAWriteImm:
		return ibv.WCRDMAWrite
	case ibv.OpRDMARead:
		return ibv.WCRDMARead
	case ibv.OpAtomicCmpSwap:
		return ibv.WCCompSwap
	case ibv.OpAtomicFetchAdd:
		return ibv.WCFetchAdd
	}
	return ibv.WCAtomicExt
}
