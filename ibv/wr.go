package ibv

// SGE is a scatter/gather element (struct ibv_sge): Length bytes of local memory at virtual
// address Addr inside the MR whose lkey is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr). Fields that an opcode does not use are
// ignored. The SGL names the local buffer: the source of a send/write/accumulate, the destination
// of a read, and the 8- or 4-byte result buffer of an atomic.
type SendWR struct {
	ID     uint64 // returned in the work completion
	Opcode Opcode
	Flags  SendFlags
	SGL    []SGE
	// LocalBuf, when non-nil, is used as the local buffer instead of SGL (which must then be
	// empty). It is the software providers' form of an implicit on-demand-paging MR
	// (IBV_ACCESS_ON_DEMAND over the whole address space): any Go memory may be named without
	// registration. The consumer must not touch it until the request completes.
	LocalBuf []byte
	Imm      uint32 // immediate data of OpSendImm / OpRDMAWriteImm

	// RDMA and atomics: the remote virtual address and its rkey.
	RemoteAddr uint64
	RKey       uint32

	// Atomics: CompareAdd is the compare value of a compare-and-swap, the addend of a fetch-and-add
	// and the new value of a swap; Swap is the new value of a compare-and-swap.
	CompareAdd uint64
	Swap       uint64

	// Accumulate: element type and scale; the scale is converted to AccType (the imaginary part is
	// used by the complex types only).
	AccType AccType
	Scale   complex128

	// UD: destination address handle, QP number and Q_Key. DC: the destination of the RDMA or
	// atomic (its port by AH, its DC QP by RemoteQPN); QKey is ignored.
	AH        *AH
	RemoteQPN uint32
	QKey      uint32
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	ByteLen uint32 // bytes received (receives) or transferred
	QPNum   uint32 // local QP number
	SrcQP   uint32 // UD receives: source QP number
	SrcAddr string // UD receives: provider address of the source port
	Imm     uint32
	HasImm  bool
	// VendorErr carries a provider-specific detail for a failed completion.
	VendorErr uint32
}

// AHAttr is an address vector (struct ibv_ah_attr): where a path leads.
//
// Software providers route by Addr, the provider address of the destination port (for tcp/udp a
// "host:port" network endpoint, for shm a node-local endpoint name), as RoCE routes by GID.
// DLID and SrcPathBits keep their IB meaning: the destination LID (the port's base LID plus path
// bits, [Vishnu07 §2.2] LMC) selects one of the port's 2^LMC paths; providers map different
// path bits to different connections or flows.
type AHAttr struct {
	Addr        string
	DLID        uint16
	SrcPathBits uint8
	SL          uint8
	PortNum     uint8 // local port (1-based)
	// DGID is the destination GID of a global route (the GRH's DGID); a UD send to a multicast
	// group names the group's MGID here and its MLID in DLID (see AttachMcast).
	DGID GID
}

// AttrMask selects the QPAttr fields a Modify sets (enum ibv_qp_attr_mask).
type AttrMask uint32

const (
	AttrState        AttrMask = 1 << 0
	AttrAccessFlags  AttrMask = 1 << 3
	AttrPKeyIndex    AttrMask = 1 << 4
	AttrPort         AttrMask = 1 << 5
	AttrQKey         AttrMask = 1 << 6
	AttrAV           AttrMask = 1 << 7 // primary path (AHAttr)
	AttrPathMTU      AttrMask = 1 << 8
	AttrTimeout      AttrMask = 1 << 9
	AttrRetryCnt     AttrMask = 1 << 10
	AttrRNRRetry     AttrMask = 1 << 11
	AttrRQPSN        AttrMask = 1 << 12
	AttrMaxQPRdAtom  AttrMask = 1 << 13
	AttrAltPath      AttrMask = 1 << 14
	AttrMinRNRTimer  AttrMask = 1 << 15
	AttrSQPSN        AttrMask = 1 << 16
	AttrMaxDestRdAtm AttrMask = 1 << 17
	AttrPathMigState AttrMask = 1 << 18
	AttrDestQPN      AttrMask = 1 << 20
)

// QPAttr holds queue pair attributes (struct ibv_qp_attr).
type QPAttr struct {
	State       QPState
	CurState    QPState
	AccessFlags Access // remote access allowed to incoming RDMA/atomic requests (RC)
	PortNum     uint8
	QKey        uint32 // UD
	PathMTU     int    // bytes
	RQPSN       uint32 // expected PSN of the first incoming request (RTR)
	SQPSN       uint32 // PSN of the first outgoing request (RTS)
	DestQPN     uint32
	AV          AHAttr // primary path
	AltAV       AHAttr // alternate path (APM)
	AltPortNum  uint8
	// Timeout is the local ACK timeout as in IB: 4.096 µs × 2^Timeout (0 means infinite).
	Timeout      uint8
	AltTimeout   uint8
	RetryCnt     uint8 // transport retries before RETRY_EXC_ERR (or migration when ARMED), ≤ 7
	RNRRetry     uint8 // receiver-not-ready retries (7 = infinite)
	MinRNRTimer  uint8
	MaxRdAtomic  uint8 // outstanding RDMA reads/atomics as initiator
	MaxDestRdAtm uint8 // outstanding RDMA reads/atomics as responder
	PathMigState MigState
	Cap          QPCap
}

// QPCap gives queue sizes (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr are the creation attributes of a queue pair (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	SRQ    *SRQ
	Cap    QPCap
	// SigAll: every send work request generates a completion (sq_sig_all).
	SigAll bool
}

// LocalLen is the length in bytes of the request's local buffer (LocalBuf or the SGL).
func (wr *SendWR) LocalLen() uint64 {
	if wr.LocalBuf != nil {
		return uint64(len(wr.LocalBuf))
	}
	return SGLLen(wr.SGL)
}
