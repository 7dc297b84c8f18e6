"""An independent judge of answers against voxels: coal's octree of OctoMap's own occupied
cells and a URDF's collision geometry as Pinocchio reads it (coal shapes and meshes), never
the boxes or spheres the solver was given. For the tests that send maps through the node."""

from __future__ import annotations

import numpy as np


def octree_of_cells(coal, cells, resolution: float):
    """coal's octree of occupied cells ``[(x, y, z, edge), ...]`` (OctoMap's leaves: a coarse
    leaf as its cells of ``resolution``)."""
    fine = []
    for x, y, z, e in cells:
        k = int(round(e / resolution))
        a = (np.arange(k) + 0.5) * resolution - 0.5 * e
        fine.append(np.stack(np.meshgrid(a + x, a + y, a + z, indexing="ij"), -1)
                    .reshape(-1, 3))
    return coal.makeOctree(np.concatenate(fine), float(resolution))


def coal_triangles(G):
    """(vertices (n, 3), triangles (m, 3)) of a coal BVH mesh ``G``."""
    return np.asarray(G.vertices()), np.array(
        [[t[0], t[1], t[2]] for t in (G.tri_indices(k) for k in range(G.num_tris))],
        dtype=np.int64).reshape(-1, 3)


def meshes_as_read(geom) -> list:
    """Each mesh of Pinocchio's geometry model ``geom`` that coal's loader reads otherwise than
    the file says (its area off by more than 1 % from trimesh's reading: coal 3.0.3 misplaces
    the triangles of a COLLADA file's second ``<polylist>``, as in iCub's head) replaced, in
    place, by the file's triangles as trimesh reads them (scaled as the URDF says); the paths
    replaced. A judge that misread a mesh would judge another robot than the URDF's."""
    import coal
    import trimesh

    out = []
    for g in geom.geometryObjects:
        G = g.geometry
        if not g.meshPath or not hasattr(G, "num_tris"):
            continue
        mesh = trimesh.load(g.meshPath, force="mesh")
        mesh.apply_scale(np.asarray(g.meshScale, dtype=np.float64))
        area = trimesh.Trimesh(*coal_triangles(G), process=False).area
        if abs(area - mesh.area) <= 0.01 * max(area, mesh.area):
            continue
        b = coal.BVHModelOBBRSS()
        b.beginModel(len(mesh.faces), len(mesh.vertices))
        b.addVertices(np.asarray(mesh.vertices, dtype=np.float64))
        b.addTriangles(np.asarray(mesh.faces, dtype=np.int32))
        b.endModel()
        g.geometry = b
        out.append(g.meshPath)
    return out


class UrdfJudge:
    """Distances from a URDF's collision geometry (Pinocchio's FK and geometry model) at a
    configuration given by joint names and values (the other joints at Pinocchio's neutral
    values) to a coal collision object placed in the URDF's root frame."""

    def __init__(self, urdf_text: str, links=None):
        import coal  # noqa: F401  (Pinocchio's geometry is coal's)
        import pinocchio as pin

        self.pin = pin
        self.model = pin.buildModelFromXML(urdf_text)
        self.geom = pin.buildGeomFromUrdfString(self.model, urdf_text,
                                                pin.GeometryType.COLLISION)
        self.replaced = meshes_as_read(self.geom)
        self.data = self.model.createData()
        self.gdata = pin.GeometryData(self.geom)
        self.link = [self.model.frames[g.parentFrame].name for g in self.geom.geometryObjects]
        self.keep = [k for k, n in enumerate(self.link) if links is None or n in links]
        assert self.keep, "no collision geometry on the links judged"

    @classmethod
    def of_moving_links(cls, urdf_text: str, cm) -> "UrdfJudge":
        """The judge of the links a solve checks against the world: ``cm``'s (a
        :class:`~ros2_ik.model.CollisionModel`) links not rigid with the base."""
        return cls(urdf_text, links={cm.link_names[c] for c in range(len(cm.link_names))
                                     if not cm.static[c]})

    def distance(self, names, q, obj) -> float:
        """The least distance of the judged links' geometry to ``obj`` at configuration
        (``names``, ``q``) (negative: penetrating)."""
        import coal

        pin = self.pin
        qp = pin.neutral(self.model)
        unknown = [n for n in names if not self.model.existJointName(n)]
        assert not unknown, f"joints the URDF judged has not: {unknown}"
        for n, v in zip(names, q):
            j = self.model.joints[self.model.getJointId(n)]
            if j.nq == 2:
                qp[j.idx_q], qp[j.idx_q + 1] = np.cos(v), np.sin(v)
            else:
                qp[j.idx_q] = v
        pin.updateGeometryPlacements(self.model, self.data, self.geom, self.gdata, qp)
        at = coal.Transform3s()
        worst = np.inf
        for k in self.keep:
            M = self.gdata.oMg[k]
            res = coal.DistanceResult()
            d = coal.distance(self.geom.geometryObjects[k].geometry,
                              coal.Transform3s(M.rotation, M.translation), obj, at,
                              coal.DistanceRequest(), res)
            worst = min(worst, float(d))
        return worst
