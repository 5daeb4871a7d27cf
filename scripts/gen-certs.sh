#!/usr/bin/env bash
# gen-certs.sh: a throwaway CA and certificates for a secured cluster, made with
# openssl at start-up; nothing here is ever committed.
#
#   scripts/gen-certs.sh DIR [BROKER_NAME...]
#
# writes into DIR (created, mode 700):
#   ca.pem, ca.key                      the CA (ssl.truststore.location, type PEM)
#   <name>.pem, <name>.key              one certificate per broker name (default: broker),
#                                       SAN DNS:<name>, DNS:localhost, IP:127.0.0.1, IP:::1
#                                       and the SANS words (e.g. SANS="DNS:broker-1 IP:172.29.0.11")
#   <name>-keystore.pem                 its key and chain in one file, as Kafka's PEM
#                                       keystore (ssl.keystore.type=PEM, ssl.keystore.location)
#   client.pem, client.key, client-keystore.pem
#                                       a client certificate for mTLS, subject
#                                       CN=${CLIENT_CN:-client},OU=kafkazk,O=kafkazk
#   <name>.p12 (with KEYSTORE_PASSWORD) the broker key and chain as legacy PKCS12 too
#                                       (openssl pkcs12 -export -legacy), for tools that
#                                       want one; ssl.keystore.type=PKCS12
#
# Keys are P-256 ECDSA in unencrypted PKCS#8; the CA lives DAYS [30] days.
# An existing DIR/ca.pem is kept (and its key reused), so brokers added later
# share the CA; FORCE=1 starts over. Files are readable by the owner only,
# except the certificates; CHMOD=644 makes keys readable by all (for containers
# that run as another user, on a throwaway cluster only).
set -euo pipefail

die() {
	printf 'gen-certs.sh: %s\n' "$*" >&2
	exit 1
}
(($# >= 1)) || die "usage: gen-certs.sh DIR [BROKER_NAME...]"
command -v openssl >/dev/null 2>&1 || die "openssl not found (apt-get install openssl)"
DIR=$1
shift
NAMES=("$@")
((${#NAMES[@]} > 0)) || NAMES=(broker)
DAYS=${DAYS:-30}
SANS=${SANS:-}
CLIENT_CN=${CLIENT_CN:-client}
KEYSTORE_PASSWORD=${KEYSTORE_PASSWORD:-}
CHMOD=${CHMOD:-600}

mkdir -p "$DIR"
chmod 700 "$DIR"
cd "$DIR"
[[ ${FORCE:-0} != 1 ]] || rm -f ca.pem ca.key ca.srl
umask 077

if [[ ! -f ca.pem || ! -f ca.key ]]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
		-days "$DAYS" -subj "/O=kafkazk/CN=kafkazk throwaway CA $(date -u +%Y%m%dT%H%M%SZ)" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
	printf 'gen-certs.sh: new CA %s/ca.pem\n' "$DIR"
fi

# leaf NAME SUBJECT EXTFILE-CONTENT: NAME.key, NAME.pem, NAME-keystore.pem.
leaf() {
	local name=$1 subj=$2 ext=$3
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name.tmp.key" \
		-out "$name.csr" -subj "$subj" 2>/dev/null
	openssl pkcs8 -topk8 -nocrypt -in "$name.tmp.key" -out "$name.key"
	rm -f "$name.tmp.key"
	printf '%s\n' "$ext" >"$name.ext"
	openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$DAYS" \
		-extfile "$name.ext" -out "$name.pem" 2>/dev/null
	rm -f "$name.csr" "$name.ext"
	cat "$name.key" "$name.pem" ca.pem >"$name-keystore.pem"
	chmod "$CHMOD" "$name.key" "$name-keystore.pem"
	chmod 644 "$name.pem"
}

for name in "${NAMES[@]}"; do
	[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "broker name '$name': letters, digits, . _ - only"
	san="DNS:$name,DNS:localhost,IP:127.0.0.1,IP:::1"
	for s in $SANS; do san+=",$s"; done
	leaf "$name" "/O=kafkazk/OU=kafkazk/CN=$name" \
		"$(printf 'subjectAltName=%s\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' "$san")"
	if [[ -n $KEYSTORE_PASSWORD ]]; then
		openssl pkcs12 -export -legacy -in "$name.pem" -inkey "$name.key" -certfile ca.pem \
			-name "$name" -passout "pass:$KEYSTORE_PASSWORD" -out "$name.p12" 2>/dev/null ||
			openssl pkcs12 -export -in "$name.pem" -inkey "$name.key" -certfile ca.pem \
				-name "$name" -passout "pass:$KEYSTORE_PASSWORD" -out "$name.p12"
		chmod "$CHMOD" "$name.p12"
	fi
	printf 'gen-certs.sh: %s/%s.pem (%s)\n' "$DIR" "$name" "$san"
done
leaf client "/O=kafkazk/OU=kafkazk/CN=$CLIENT_CN" \
	"$(printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n')"
chmod 644 ca.pem
[[ $CHMOD != 644 ]] || chmod 755 .
printf 'gen-certs.sh: %s/client.pem (CN=%s,OU=kafkazk,O=kafkazk)\n' "$DIR" "$CLIENT_CN"
