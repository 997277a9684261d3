//go:build race

package mailbox

// raceEnabled: the race detector changes allocation, which some tests count.
const raceEnabled = true
