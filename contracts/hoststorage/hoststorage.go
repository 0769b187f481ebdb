package hoststorage

// DriverName is the CSI driver's name: the provisioner of its
// StorageClasses and the driver of its PersistentVolumes.
const DriverName = "hostpath.csi.tekvirt.io"

// TopologyKey is the topology key of a node-local volume: the node label
// the kubelet sets from the driver's NodeGetInfo, and the key of the
// volume's node affinity.
const TopologyKey = "topology." + DriverName + "/node"

// SharedTopologyKey is the topology key of a shared volume: every node with
// the shared root reports it "true", and a shared volume's node affinity
// asks for it, so it may go to any of those nodes and to no other (and
// the snapshot controller hands its snapshots to one of them).
const SharedTopologyKey = "topology." + DriverName + "/shared"

// ParamShared is the StorageClass parameter that asks for shared volumes:
// under a root every node mounts from one shared file system, not pinned
// to a node, ReadWriteMany.
const ParamShared = "shared"

// SnapshotClass is the VolumeSnapshotClass of the driver's snapshots.
const SnapshotClass = "tekvirt-hostpath-snapshots"

// The CSI volume handles (and snapshot IDs) of the driver:
// LocalPrefix<node>/<name> for a volume on one node, SharedPrefix<name>
// for one on the shared root.
const (
	LocalPrefix  = "local/"
	SharedPrefix = "shared/"
)
