//go:build !race

package soak_test

const raceEnabled = false
