module github.com/perkey/perkey/bench

go 1.26.0

require (
	github.com/moby/locker v1.0.1
	github.com/perkey/perkey v0.0.0-00010101000000-000000000000
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require (
	github.com/alitto/pond/v2 v2.7.1 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
)

replace github.com/perkey/perkey => ../
