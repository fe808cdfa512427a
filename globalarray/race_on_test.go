//go:build race

package globalarray

// raceEnabled: the race detector cannot see the happens-before edges the network transport
// carries through sockets (a responder goroutine applying a remote write after a barrier that
// travelled over TCP), so the network tests are skipped under -race.
const raceEnabled = true
