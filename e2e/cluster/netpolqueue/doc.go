// Package netpolqueue steers the testbed's Pod traffic to
// kube-network-policies, the kind project's NetworkPolicy agent, which
// decides in user space on the first packet of each connection that it
// reads from an NFQUEUE.
//
// The agent installs its own nftables rules with the nft "queue"
// expression, which needs the kernel's nft_queue (CONFIG_NFT_QUEUE); the
// machines the testbed runs on lack it, but have the xtables NFQUEUE
// target, which nftables reaches through nft_compat. The agent runs
// unchanged (its own rules fail to load and it goes on serving its
// queue); this package installs the equivalent rules with the xtables
// target, once the agent listens on its queue, and removes them when it
// stops. Upstream queues only the Pods some policy selects; these rules
// queue every Pod's new connections, which the agent accepts when no
// policy applies.
package netpolqueue
