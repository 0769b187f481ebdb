# tekvirt guest: the static part of a NoCloud network-config (version 2,
# as KubeVirt's examples write it) as lines the init applies with ip(8):
#   address IFACE CIDR
#   gateway4 IFACE ADDRESS
#   gateway6 IFACE ADDRESS
# DHCP needs nothing: the init runs udhcpc on eth0 in any case. Only the
# keys below are read; an interface is the last key that opens a block
# and is none of version 2's own. Needs no more than busybox's awk.
function unquote(s) {
  gsub(/^[[:space:]]+|[[:space:]]+$/, "", s)
  gsub(/^["']|["']$/, "", s)
  return s
}
BEGIN { skip = -1 }
/^[[:space:]]*(#|$)/ { next }
{
  line = $0
  sub(/[[:space:]]+#.*$/, "", line)
  match(line, /^[[:space:]]*/)
  indent = RLENGTH
  # Inside a block that holds no interface address (nameservers' own
  # addresses, routes, match): skipped whole.
  if (skip >= 0 && indent > skip) next
  skip = -1
}
# A block list item (addresses:\n  - a/b).
line ~ /^[[:space:]]*-[[:space:]]/ {
  if (list && iface != "") {
    item = line
    sub(/^[[:space:]]*-[[:space:]]*/, "", item)
    print "address", iface, unquote(item)
  }
  next
}
{
  list = 0
  colon = index(line, ":")
  if (colon == 0) next
  key = unquote(substr(line, 1, colon - 1))
  value = unquote(substr(line, colon + 1))
}
key ~ /^(match|nameservers|routes|routing-policy|dhcp4-overrides|dhcp6-overrides)$/ { skip = indent; next }
value == "" {
  if (key == "addresses") list = 1
  else if (key != "network" && key != "ethernets") iface = key
  next
}
key == "addresses" && iface != "" {
  gsub(/^\[|\]$/, "", value)
  n = split(value, items, ",")
  for (i = 1; i <= n; i++) if (unquote(items[i]) != "") print "address", iface, unquote(items[i])
  next
}
(key == "gateway4" || key == "gateway6") && iface != "" { print key, iface, value }
