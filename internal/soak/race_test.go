//go:build race

package soak_test

const raceEnabled = true
