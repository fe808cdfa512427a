package ibv

import (
	"fmt"

	"github.com/goarmci/goarmci/internal/accum"
)

// Access is a set of memory-region access flags (enum ibv_access_flags).
type Access uint32

const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE (requires LocalWrite)
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC (requires LocalWrite); also gates Accumulate

	// AccessAll is the usual flag set of a window or an ARMCI segment.
	AccessAll = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

// QPType is the transport service of a queue pair.
type QPType uint8

const (
	RC QPType = iota + 1 // reliable connected (IBV_QPT_RC)
	UD                   // unreliable datagram (IBV_QPT_UD)
	// DC is a dynamically connected queue pair (the Dynamically Connected transport of
	// [Takagi15 §2.1]; mlx5's DCI and DCT in one QP): both the initiator and the target of RDMA
	// write, read, atomics and accumulates to and from any DC QP, each work request naming its
	// destination by an address handle and a remote QP number (SendWR.AH, SendWR.RemoteQPN).
	// Software providers carry it as datagrams with the reliability in the engine: a small
	// record per peer, created on first contact (PSNs, ACKs, retransmission, duplicate
	// suppression with atomic replay, as RC), instead of a queue pair per peer — the scalable
	// transport with a reliability engine of [Sridhar08]. It carries no send/receive.
	DC
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UD:
		return "UD"
	case DC:
		return "DC"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPState is the communication state of a queue pair (enum ibv_qp_state; [Vishnu07 §2.2]).
type QPState uint8

const (
	StateReset QPState = iota // RESET: just created or reset
	StateInit                 // INIT: receives may be posted
	StateRTR                  // RTR: ready to receive
	StateRTS                  // RTS: ready to send
	StateSQD                  // SQD: send queue drained (drain requested; no new sends started)
	StateSQE                  // SQE: send queue error (UD only)
	StateError                // ERROR: all outstanding work requests flushed
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERROR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// MigState is the automatic path migration state of an RC queue pair (enum ibv_mig_state;
// [Vishnu07 §2.2 and ch. 9]).
type MigState uint8

const (
	Migrated MigState = iota // MIGRATED: no alternate path loaded (initial state)
	Rearm                    // REARM: an alternate path was given, the HCA is loading it
	Armed                    // ARMED: the alternate path is loaded; a fault will migrate to it
)

var migStateNames = [...]string{"MIGRATED", "REARM", "ARMED"}

func (s MigState) String() string {
	if int(s) < len(migStateNames) {
		return migStateNames[s]
	}
	return fmt.Sprintf("MigState(%d)", uint8(s))
}

// Opcode is the operation of a send work request (enum ibv_wr_opcode). The last group are
// software-provider extensions in the spirit of vendor extended atomics: they are carried by the
// same RC engine, checked against AccessRemoteAtomic and applied atomically by the responder.
type Opcode uint8

const (
	OpSend           Opcode = iota + 1 // IBV_WR_SEND
	OpSendImm                          // IBV_WR_SEND_WITH_IMM
	OpRDMAWrite                        // IBV_WR_RDMA_WRITE
	OpRDMAWriteImm                     // IBV_WR_RDMA_WRITE_WITH_IMM
	OpRDMARead                         // IBV_WR_RDMA_READ
	OpAtomicCmpSwap                    // IBV_WR_ATOMIC_CMP_AND_SWP: 8 bytes, 8-byte aligned
	OpAtomicFetchAdd                   // IBV_WR_ATOMIC_FETCH_AND_ADD: 8 bytes, 8-byte aligned

	// Extensions (software providers only).
	OpAtomicFetchAdd32 // 4-byte fetch-and-add, 4-byte aligned; result in the low 4 bytes
	OpAtomicSwap64     // 8-byte unconditional swap
	OpAtomicSwap32     // 4-byte unconditional swap
	OpAtomicCmpSwap32  // 4-byte compare-and-swap
	OpAccumulate       // remote[i] += Scale*local[i] for AccType elements, atomic per element
)

var opcodeNames = map[Opcode]string{
	OpSend: "SEND", OpSendImm: "SEND_IMM", OpRDMAWrite: "RDMA_WRITE", OpRDMAWriteImm: "RDMA_WRITE_IMM",
	OpRDMARead: "RDMA_READ", OpAtomicCmpSwap: "CMP_SWAP", OpAtomicFetchAdd: "FETCH_ADD",
	OpAtomicFetchAdd32: "FETCH_ADD32", OpAtomicSwap64: "SWAP64", OpAtomicSwap32: "SWAP32",
	OpAtomicCmpSwap32: "CMP_SWAP32", OpAccumulate: "ACCUMULATE",
}

func (o Opcode) String() string {
	if n, ok := opcodeNames[o]; ok {
		return n
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// IsAtomic reports whether o is an atomic (including the extended atomics and Accumulate).
func (o Opcode) IsAtomic() bool { return o >= OpAtomicCmpSwap && o <= OpAccumulate }

// AtomicSize is the operand size in bytes of an atomic opcode (0 for Accumulate and non-atomics).
func (o Opcode) AtomicSize() int {
	switch o {
	case OpAtomicCmpSwap, OpAtomicFetchAdd, OpAtomicSwap64:
		return 8
	case OpAtomicFetchAdd32, OpAtomicSwap32, OpAtomicCmpSwap32:
		return 4
	}
	return 0
}

// AccType is the element type of an OpAccumulate: the datatype argument of ARMCI_Acc
// (ARMCI_ACC_INT, _LNG, _FLT, _DBL, _CPL, _DCP), little-endian elements.
type AccType uint8

// Accumulate element types.
const (
	AccInt32      AccType = iota + 1 // ARMCI_ACC_INT: int32, 4 bytes
	AccInt64                         // ARMCI_ACC_LNG: int64, 8 bytes
	AccFloat32                       // ARMCI_ACC_FLT: float32, 4 bytes
	AccFloat64                       // ARMCI_ACC_DBL: float64, 8 bytes
	AccComplex64                     // ARMCI_ACC_CPL: complex64, 8 bytes
	AccComplex128                    // ARMCI_ACC_DCP: complex128, 16 bytes
)

// The kernels in internal/accum take an AccType by a plain conversion (accum.Type(t)), so the
// two enumerations must have the same values: the index below is out of range, or the
// subtraction overflows, and the package does not compile, when one of them differs.
var _ = [1]struct{}{}[AccInt32-AccType(accum.Int32)+
	AccInt64-AccType(accum.Int64)+
	AccFloat32-AccType(accum.Float32)+
	AccFloat64-AccType(accum.Float64)+
	AccComplex64-AccType(accum.Complex64)+
	AccComplex128-AccType(accum.Complex128)]

// kernel is t as the element type of the accumulate kernels (the same value).
func (t AccType) kernel() accum.Type { return accum.Type(t) }

// Size is the element size in bytes (0 for an unknown type).
func (t AccType) Size() int { return t.kernel().Size() }

// Align is the alignment in bytes an accumulate's target address needs: the component size
// (4 for AccComplex64, 8 for AccComplex128), else Size.
func (t AccType) Align() int { return t.kernel().Align() }

// String is the Go name of the element type ("int32", ..., "complex128"; "Type(n)" when
// unknown).
func (t AccType) String() string { return t.kernel().String() }

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint8

const (
	SendSignaled SendFlags = 1 << 0 // IBV_SEND_SIGNALED: generate a completion on success
	SendFence    SendFlags = 1 << 1 // IBV_SEND_FENCE: wait for prior RDMA reads/atomics
	SendInline   SendFlags = 1 << 2 // IBV_SEND_INLINE: payload copied at post time
	// SendMore says another PostSend on the same QP follows at once, as the next work request of
	// an ibv_post_send list would: the provider may hold this request's packets and send them
	// with the next one's in one burst (one doorbell for the list; over tcp one writev, and one
	// coalesced ACK at the responder). The poster must follow it with a PostSend without
	// SendMore, which releases the burst, whatever it returns; destroying the QP or its moving to
	// ERROR also releases it. Providers without batching ignore it.
	SendMore SendFlags = 1 << 3
)

// WCStatus is the status of a work completion (enum ibv_wc_status).
type WCStatus uint8

const (
	WCSuccess        WCStatus = iota // IBV_WC_SUCCESS
	WCLocLenErr                      // IBV_WC_LOC_LEN_ERR: receive buffer too small
	WCLocQPOpErr                     // IBV_WC_LOC_QP_OP_ERR
	WCLocProtErr                     // IBV_WC_LOC_PROT_ERR: lkey/bounds/access of a local SGE
	WCWRFlushErr                     // IBV_WC_WR_FLUSH_ERR: flushed because the QP is in ERROR
	WCBadRespErr                     // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr                   // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr                   // IBV_WC_REM_INV_REQ_ERR: malformed/unsupported request at the responder
	WCRemAccessErr                   // IBV_WC_REM_ACCESS_ERR: rkey, bounds or access flags at the responder
	WCRemOpErr                       // IBV_WC_REM_OP_ERR
	WCRetryExcErr                    // IBV_WC_RETRY_EXC_ERR: transport retries exhausted
	WCRNRRetryExcErr                 // IBV_WC_RNR_RETRY_EXC_ERR: receiver not ready, retries exhausted
	WCGeneralErr                     // IBV_WC_GENERAL_ERR
)

var wcStatusNames = [...]string{"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_PROT_ERR",
	"WR_FLUSH_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
	"REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "GENERAL_ERR"}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WCOpcode is the operation a work completion reports (enum ibv_wc_opcode).
type WCOpcode uint8

const (
	WCSend WCOpcode = iota + 1
	WCRDMAWrite
	WCRDMARead
	WCCompSwap
	WCFetchAdd
	WCAtomicExt // any extended atomic or Accumulate
	WCRecv
	WCRecvRDMAImm
)

// EventType is the type of an asynchronous event (enum ibv_event_type).
type EventType uint8

const (
	EventCQErr            EventType = iota + 1 // IBV_EVENT_CQ_ERR
	EventQPFatal                               // IBV_EVENT_QP_FATAL: QP moved to ERROR
	EventQPReqErr                              // IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr                           // IBV_EVENT_QP_ACCESS_ERR
	EventCommEst                               // IBV_EVENT_COMM_EST
	EventSQDrained                             // IBV_EVENT_SQ_DRAINED: SQD reached with nothing outstanding
	EventPathMig                               // IBV_EVENT_PATH_MIG: migrated to the alternate path
	EventPathMigErr                            // IBV_EVENT_PATH_MIG_ERR: the alternate path failed to load
	EventPortActive                            // IBV_EVENT_PORT_ACTIVE
	EventPortErr                               // IBV_EVENT_PORT_ERR: port went down
	EventLIDChange                             // IBV_EVENT_LID_CHANGE
	EventQPLastWQEReached                      // IBV_EVENT_QP_LAST_WQE_REACHED
	EventDeviceFatal                           // IBV_EVENT_DEVICE_FATAL
	// EventSRQLimitReached (IBV_EVENT_SRQ_LIMIT_REACHED): the receives posted to an SRQ fell
	// below the limit armed with SRQ.ArmLimit; AsyncEvent.SRQ names it, the limit is disarmed.
	EventSRQLimitReached
)

var eventNames = map[EventType]string{
	EventCQErr: "CQ_ERR", EventQPFatal: "QP_FATAL", EventQPReqErr: "QP_REQ_ERR",
	EventQPAccessErr: "QP_ACCESS_ERR", EventCommEst: "COMM_EST", EventSQDrained: "SQ_DRAINED",
	EventPathMig: "PATH_MIG", EventPathMigErr: "PATH_MIG_ERR", EventPortActive: "PORT_ACTIVE",
	EventPortErr: "PORT_ERR", EventLIDChange: "LID_CHANGE", EventQPLastWQEReached: "QP_LAST_WQE_REACHED",
	EventDeviceFatal: "DEVICE_FATAL", EventSRQLimitReached: "SRQ_LIMIT_REACHED",
}

func (e EventType) String() string {
	if n, ok := eventNames[e]; ok {
		return n
	}
	return fmt.Sprintf("EventType(%d)", uint8(e))
}

// PortState is the logical state of a port (enum ibv_port_state).
type PortState uint8

const (
	PortDown   PortState = 1
	PortInit   PortState = 2
	PortArmed  PortState = 3
	PortActive PortState = 4
)

func (s PortState) String() string {
	switch s {
	case PortDown:
		return "DOWN"
	case PortInit:
		return "INIT"
	case PortArmed:
		return "ARMED"
	case PortActive:
		return "ACTIVE"
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}
