package ibv

// Driver is what a provider implements for one opened device. The generic layer calls it after
// its own checks (state machine, keys, sizes); the driver only moves bytes and reports
// completions and events through package ibv/provider, which holds every provider-side
// operation (Push, PostEvent, SetState, the key lookups and memory checks).
type Driver interface {
	// Attr describes the device.
	Attr() DeviceAttr
	// Port describes port num (1-based); ErrInvalidArgument for an unknown port.
	Port(num uint8) (PortAttr, error)
	// RegMR is told of a new memory region (keys already assigned) and may refuse it.
	RegMR(mr *MR) error
	// DeregMR is told that mr is going away; after it returns no access to mr's memory may start.
	DeregMR(mr *MR) error
	// CreateQP creates the provider side of qp (type, CQs and capacities are set).
	CreateQP(qp *QP) (QPDriver, error)
	// CreateAH resolves an address handle (checks its destination) and may refuse it.
	CreateAH(ah *AH) error
	// Close releases the device; it stops every goroutine the driver started.
	Close() error
}

// QPDriver is the provider side of one queue pair.
type QPDriver interface {
	// Modify applies a state/attribute change that the generic state machine accepted. cur is the
	// QP's attributes before the change; attr and mask are the request. It is called with the QP's
	// modify lock held; on error the QP keeps its previous attributes. Moving to StateError must
	// flush every outstanding work request with WCWRFlushErr; StateReset empties both queues.
	Modify(cur *QPAttr, attr *QPAttr, mask AttrMask) error
	// PostSend starts wr. The generic layer has checked the QP state, the opcode against the QP
	// type, SGE counts and atomic sizes; local key/bounds/access errors are reported by the driver
	// as a completion with WCLocProtErr, as verbs do.
	PostSend(wr *SendWR) error
	// PostRecv queues a receive buffer.
	PostRecv(wr *RecvWR) error
	// Destroy releases the QP; outstanding requests are dropped without completions.
	Destroy() error
}

// DeviceAttr describes a device (struct ibv_device_attr, the fields software providers use).
type DeviceAttr struct {
	Name        string
	Provider    string // "shm", "tcp", "udp", ...
	PhysPortCnt int
	MaxQP       int
	MaxQPWR     int
	MaxSGE      int
	MaxCQE      int
	MaxMRSize   uint64
	MaxMsgSize  uint64 // largest RC message, bytes
	AtomicCap   bool
	// MaxMcastGrp is the number of multicast groups a port may join (0: the provider has no
	// UD multicast, AttachMcast fails with ErrUnsupported).
	MaxMcastGrp int
}

// PortAttr describes a port (struct ibv_port_attr plus the provider address software routing needs).
type PortAttr struct {
	Num    uint8
	State  PortState
	LID    uint16 // base LID
	LMC    uint8  // 2^LMC path bits [Vishnu07 §2.2]
	MTU    int    // active MTU in bytes (UD datagram limit; RC segment size)
	Addr   string // provider address other ports route to (AHAttr.Addr)
	Rate   uint64 // link rate in bits/s when known (0: unknown)
	Ifname string // network interface, for network providers
}
