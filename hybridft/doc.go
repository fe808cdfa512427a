// Package hybridft is the fault-tolerant RC connection layer that multirail builds on: the
// Hybrid-IBNFT design of seed 003 (§IV) and seed 000 ch. 9–10. A Conn is one reliable connection
// to a peer over one path (one RC queue pair). Its job, when complete, is to keep that connection
// alive across network faults: automatic path migration (APM) first, software recovery through
// the UD connection manager when APM fails, retransmission of failed requests exactly once, and
// network-partition handling.
//
// This first layer is the pass-through: connection setup (QP creation and the
// RESET→INIT→RTR→RTS handshake from exchanged ConnInfo) and posting; faults surface to the caller
// as failed completions. The interfaces are the ones the recovery modules plug into.
package hybridft
