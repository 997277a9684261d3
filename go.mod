module github.com/perkey/perkey

go 1.26.0

require (
	github.com/alitto/pond/v2 v2.7.1
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require go.uber.org/multierr v1.10.0 // indirect
