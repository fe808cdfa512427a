package engine

import (
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/ibv"
)

// DeviceConfig describes a network device whose QPs the engine runs.
type DeviceConfig struct {
	Name     string
	Provider string // "tcp", "udp", ...
	Ports    []ibv.PortAttr
	Engine   Config // Port is filled in by NewDevice
	// Close is the provider's cleanup (stop readers, close sockets); it runs before the engine stops.
	Close func() error
}

// Device is the ibv.Driver of an engine-based provider: ports, MR and AH bookkeeping (nothing to
// do for software providers beyond the generic layer) and QPs run by the engine.
type Device struct {
	cfg   DeviceConfig
	e     *Engine
	mu    sync.RWMutex
	ports []ibv.PortAttr
	once  sync.Once
	err   error
}

// NewDevice creates the device and its engine.
func NewDevice(cfg DeviceConfig) *Device {
	d := &Device{cfg: cfg, ports: append([]ibv.PortAttr(nil), cfg.Ports...)}
	ec := cfg.Engine
	ec.Port = d.Port
	d.e = New(ec)
	return d
}

// Engine is the device's transport engine (providers hand it inbound packets).
func (d *Device) Engine() *Engine { return d.e }

// Attr describes the device.
func (d *Device) Attr() ibv.DeviceAttr {
	d.mu.RLock()
	n := len(d.ports)
	d.mu.RUnlock()
	a := ibv.DeviceAttr{Name: d.cfg.Name, Provider: d.cfg.Provider, PhysPortCnt: n, MaxQP: 1 << 20,
		MaxQPWR: 1 << 20, MaxSGE: ibv.MaxSGEPerWR, MaxCQE: 1 << 22, MaxMRSize: 1 << 48,
		MaxMsgSize: d.e.MaxMsgSize(), AtomicCap: true}
	if d.e.Multicast() {
		a.MaxMcastGrp = MaxMcastGroups
	}
	return a
}

// Port describes port num (1-based).
func (d *Device) Port(num uint8) (ibv.PortAttr, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if num == 0 || int(num) > len(d.ports) {
		return ibv.PortAttr{}, fmt.Errorf("%w: port %d of %d", ibv.ErrInvalidArgument, num, len(d.ports))
	}
	return d.ports[num-1], nil
}

// SetPortState changes the logical state of a port (for fault emulation and link monitoring);
// the caller posts the matching async event.
func (d *Device) SetPortState(num uint8, s ibv.PortState) {
	d.mu.Lock()
	if num > 0 && int(num) <= len(d.ports) {
		d.ports[num-1].State = s
	}
	d.mu.Unlock()
}

// RegMR accepts every region (the generic layer keeps the key table).
func (d *Device) RegMR(*ibv.MR) error { return nil }

// DeregMR has nothing to release.
func (d *Device) DeregMR(*ibv.MR) error { return nil }

// CreateQP creates an engine-run RC, UD or DC QP.
func (d *Device) CreateQP(qp *ibv.QP) (ibv.QPDriver, error) { return d.e.CreateQP(qp) }

// CreateSRQ creates an engine shared receive queue (ibv.SRQCreator).
func (d *Device) CreateSRQ(srq *ibv.SRQ, maxWR int) (ibv.SRQDriver, error) {
	return d.e.CreateSRQ(srq, maxWR)
}

// CreateAH checks that the local port of the address handle exists.
func (d *Device) CreateAH(ah *ibv.AH) error {
	if ah.Attr.PortNum != 0 {
		if _, err := d.Port(ah.Attr.PortNum); err != nil {
			return err
		}
	}
	return nil
}

// Close runs the provider's cleanup, then stops the engine.
func (d *Device) Close() error {
	d.once.Do(func() {
		if d.cfg.Close != nil {
			d.err = d.cfg.Close()
		}
		d.e.Close()
	})
	return d.err
}

var (
	_ ibv.Driver     = (*Device)(nil)
	_ ibv.SRQCreator = (*Device)(nil)
	_ ibv.QPDriver   = (*QP)(nil)
	_ ibv.SRQDriver  = (*SRQ)(nil)
)
