# tls.sh: sourced by the GPU suites' shell scripts. With SCUDA_GPU_TLS=1
# the suites run over TLS: the server is started with --tls (a certificate
# made on first start in a fresh state directory) and every client trusts
# exactly that certificate through SCUDA_TLS_FINGERPRINT.
#
#   "$SCUDA" server --listen ... "${SERVER_TLS_ARGS[@]}" >LOG 2>&1 &
#   tls_trust LOG    # once the server has started
SERVER_TLS_ARGS=()
if [[ ${SCUDA_GPU_TLS:-0} == 1 ]]; then
  SERVER_TLS_ARGS=(--tls --state-dir "$(mktemp -d /tmp/scuda-gpu-tls.XXXXXX)")
fi

# tls_trust SERVER_LOG: exports SCUDA_TLS=1 and the fingerprint the server
# printed at start, waiting up to 10 s for that line.
tls_trust() {
  [[ ${SCUDA_GPU_TLS:-0} == 1 ]] || return 0
  local fp=''
  for _ in $(seq 100); do
    fp=$(grep -o 'sha256:[0-9a-f]\{64\}' "$1" 2>/dev/null | head -n 1 || true)
    [[ -n $fp ]] && break
    sleep 0.1
  done
  [[ -n $fp ]] || { echo "tls.sh: the server printed no certificate fingerprint in $1" >&2; exit 1; }
  export SCUDA_TLS=1 SCUDA_TLS_FINGERPRINT=$fp
  echo "TLS on: the server's certificate is $fp"
}
