# Sourced by the scripts that need Prometheus: makes sure prometheus and
# promtool are on PATH, installing Debian's prometheus package with apt-get
# if they are missing (with sudo unless root).
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
	echo "installing Debian's prometheus package (prometheus, promtool)"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	# The package starts a server on :9090; the checks run their own.
	if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
		$sudo systemctl stop prometheus || true
	fi
	command -v promtool >/dev/null && command -v prometheus >/dev/null || {
		echo "prometheus did not install" >&2
		exit 1
	}
fi
