package ibv

// CheckSendWR is checkSendWR, for the external tests.
var CheckSendWR = checkSendWR
