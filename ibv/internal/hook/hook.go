// Package hook hands the provider-side operations of package ibv to package ibv/provider, in
// the manner of database/sql and database/sql/driver: ibv keeps them as unexported methods and
// functions and stores each here at its init as a func value typed any (ibv cannot import
// ibv/provider, which imports ibv); ibv/provider asserts each once, when it is initialized, to
// its func type. No call pays for an assertion.
//
// Every variable is set by ibv's init and read only by ibv/provider's variable initialization;
// nothing else may touch them.
package hook

var (
	NewContext   any // func(ibv.Driver) *ibv.Context
	DeviceDriver any // func(*ibv.Context) ibv.Driver
	QPDriver     any // func(*ibv.QP) ibv.QPDriver
	SRQDriver    any // func(*ibv.SRQ) ibv.SRQDriver
	Closed       any // func(*ibv.Context) bool
	PostEvent    any // func(*ibv.Context, ibv.AsyncEvent)
	Push         any // func(*ibv.CQ, ibv.WC) bool
	SetState     any // func(*ibv.QP, ibv.QPState, ibv.AsyncEvent)
	SetArmed     any // func(*ibv.QP, bool, string)
	MigrateAuto  any // func(*ibv.QP, string) (ibv.AHAttr, bool)
	LookupLKey   any // func(*ibv.Context, uint32) *ibv.MR
	LookupRKey   any // func(*ibv.Context, uint32) *ibv.MR
	LookupQP     any // func(*ibv.Context, uint32) *ibv.QP
	RemoteSlice  any // func(*ibv.Context, *ibv.PD, uint32, uint64, uint64, ibv.Access) ([]byte, ibv.WCStatus)
	LocalSlices  any // func(*ibv.Context, *ibv.PD, []ibv.SGE, bool, [][]byte) ([][]byte, ibv.WCStatus)
	LocalBuffers any // func(*ibv.Context, *ibv.PD, *ibv.SendWR, bool, [][]byte) ([][]byte, ibv.WCStatus)
)
