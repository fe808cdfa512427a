package engine

import (
	"fmt"
	"sync/atomic"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
)

// What the network providers (tcp, udp, the in-process fabric) share around Device: the checks
// of a device's port configuration, LID allocation and port attributes, and the switch of a
// port's cable with its asynchronous events.

// DefaultMTU is the port MTU in bytes when a port's configuration leaves it zero.
const DefaultMTU = 4096

// MaxPorts is the most ports a device has (port numbers are 1..255).
const MaxPorts = 255

// CheckPortCount checks the port count n of a device of provider prov: 1..MaxPorts. Errors wrap
// ibv.ErrInvalidArgument.
func CheckPortCount(prov string, n int) error {
	if n == 0 || n > MaxPorts {
		return fmt.Errorf("%s: %w: %d ports", prov, ibv.ErrInvalidArgument, n)
	}
	return nil
}

// CheckPort checks port num's configuration of a device of provider prov and returns its MTU in
// bytes: mtu (DefaultMTU when 0) must lie in 256..maxMTU and lmc (2^lmc LIDs per port, path bits
// [Vishnu07 §2.2]) be at most 7. Errors wrap ibv.ErrInvalidArgument.
func CheckPort(prov string, num int, mtu int, lmc uint8, maxMTU int) (int, error) {
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < 256 || mtu > maxMTU || lmc > 7 {
		return 0, fmt.Errorf("%s: %w: port %d MTU %d LMC %d", prov, ibv.ErrInvalidArgument, num, mtu, lmc)
	}
	return mtu, nil
}

// LIDs hands out the base LIDs of a provider's ports, from 1: a port with LMC l takes 2^l
// consecutive LIDs (one per path bits value, [Vishnu07 §2.2]). Safe for concurrent use.
type LIDs struct{ next atomic.Uint32 }

// Port returns the attributes of an active port num with a fresh base LID: LMC lmc, MTU mtu
// bytes, provider address addr on network interface ifname.
func (l *LIDs) Port(num uint8, lmc uint8, mtu int, addr, ifname string) ibv.PortAttr {
	lid := uint16(l.next.Add(1<<lmc) - (1 << lmc) + 1)
	return ibv.PortAttr{Num: num, State: ibv.PortActive, LID: lid, LMC: lmc, MTU: mtu, Addr: addr, Ifname: ifname}
}

// SwitchPort pulls (down) or plugs back the cable of port num of device c, whose driver d is:
// the port reports ibv.PortDown (ibv.PortActive), fault runs when the port goes down (the
// provider breaks the port's paths; may be nil), then ibv.EventPortErr (ibv.EventPortActive)
// is posted, as an HCA does on a link change.
func (d *Device) SwitchPort(c *ibv.Context, num uint8, down bool, fault func()) {
	if !down {
		d.SetPortState(num, ibv.PortActive)
		provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventPortActive, Port: num})
		return
	}
	d.SetPortState(num, ibv.PortDown)
	if fault != nil {
		fault()
	}
	provider.PostEvent(c, ibv.AsyncEvent{Type: ibv.EventPortErr, Port: num, Detail: "link down"})
}

// DriverOf returns the driver of device dev as provider prov's driver type D (a provider's
// functions on its devices, such as SetPortDown, find their driver with it). Errors wrap
// ibv.ErrInvalidArgument (dev is another provider's device).
func DriverOf[D ibv.Driver](prov string, dev *ibv.Context) (D, error) {
	d, ok := provider.DeviceDriver(dev).(D)
	if !ok {
		return d, fmt.Errorf("%s: %w: %T is not a %s device", prov, ibv.ErrInvalidArgument, provider.DeviceDriver(dev), prov)
	}
	return d, nil
}
