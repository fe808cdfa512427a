package ibv

import "github.com/goarmci/goarmci/ibv/internal/hook"

// The provider-side operations, handed to package ibv/provider (see ibv/internal/hook): a
// provider needs them, a verbs user does not.
func init() {
	hook.NewContext = newContext
	hook.DeviceDriver = func(c *Context) Driver { return c.drv }
	hook.QPDriver = func(qp *QP) QPDriver { return qp.drv }
	hook.SRQDriver = func(s *SRQ) SRQDriver { return s.drv }
	hook.Closed = func(c *Context) bool { return c.closed.Load() }
	hook.PostEvent = (*Context).postEvent
	hook.Push = (*CQ).push
	hook.SetState = (*QP).setState
	hook.SetArmed = (*QP).setArmed
	hook.MigrateAuto = (*QP).migrateAuto
	hook.LookupLKey = (*Context).lookupLKey
	hook.LookupRKey = (*Context).lookupRKey
	hook.LookupQP = (*Context).lookupQP
	hook.RemoteSlice = (*Context).remoteSlice
	hook.LocalSlices = (*Context).localSlices
	hook.LocalBuffers = (*Context).localBuffers
}
