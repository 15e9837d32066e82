"""Small analytic scenes ray-cast in numpy under a fixed light (view-independent), cameras in the Blender/OpenGL
convention: objects in a void as a Blender-format scene (:func:`write_blender_scene`), or on a ground plane under a sky
as a nerfstudio-data capture (:func:`write_nerfstudio_capture`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Literal, Sequence, Tuple

import numpy as np
from jaxtyping import Float
from PIL import Image

from rff_field.core.errors import UsageError, check_fields

CAMERA_ANGLE_X = 0.6911112070083618
"""Horizontal field of view of the NeRF synthetic scenes (radians)."""
CAMERA_DISTANCE = 4.0
"""Distance of every camera from the origin (the Blender scenes' ~4.03)."""
LIGHT = np.array([0.45, 0.3, 0.84]) / np.linalg.norm([0.45, 0.3, 0.84])
"""Direction towards the light."""

Array = np.ndarray
Hit = Tuple[Float[Array, " n"], Float[Array, "n 3"]]  # distance (inf for a miss), outward normal


def _box(origins: Array, dirs: Array, lo: Sequence[float], hi: Sequence[float]) -> Hit:
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / dirs
        t0 = (np.asarray(lo) - origins) * inv
        t1 = (np.asarray(hi) - origins) * inv
    t_near = np.nanmax(np.minimum(t0, t1), axis=-1)
    t_far = np.nanmin(np.maximum(t0, t1), axis=-1)
    hit = (t_near <= t_far) & (t_near > 0)
    axis = np.nanargmax(np.minimum(t0, t1), axis=-1)
    normals = np.zeros_like(origins)
    rows = np.arange(len(origins))
    normals[rows, axis] = -np.sign(dirs[rows, axis])
    return np.where(hit, t_near, np.inf), normals


def _sphere(origins: Array, dirs: Array, center: Sequence[float], radius: float) -> Hit:
    oc = origins - np.asarray(center)
    b = np.sum(oc * dirs, axis=-1)
    c = np.sum(oc * oc, axis=-1) - radius**2
    disc = b * b - c
    t = -b - np.sqrt(np.maximum(disc, 0))
    hit = (disc >= 0) & (t > 0)
    t = np.where(hit, t, np.inf)
    points = origins + dirs * np.where(hit, t, 0)[:, None]
    return t, (points - np.asarray(center)) / radius


def _cylinder(origins: Array, dirs: Array, center_xy: Sequence[float], radius: float, z0: float, z1: float) -> Hit:
    """A closed vertical cylinder (side and caps)."""
    oxy = origins[:, :2] - np.asarray(center_xy)
    dxy = dirs[:, :2]
    a = np.sum(dxy * dxy, axis=-1)
    b = np.sum(oxy * dxy, axis=-1)
    c = np.sum(oxy * oxy, axis=-1) - radius**2
    disc = b * b - a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        t_side = (-b - np.sqrt(np.maximum(disc, 0))) / a
    z_side = origins[:, 2] + t_side * dirs[:, 2]
    side = (disc >= 0) & (a > 1e-12) & (t_side > 0) & (z_side >= z0) & (z_side <= z1)
    t_side = np.where(side, t_side, np.inf)
    normals_side = np.zeros_like(origins)
    normals_side[:, :2] = (oxy + dxy * np.where(side, t_side, 0)[:, None]) / radius

    best_t, best_n = t_side, normals_side
    for z_cap, sign in ((z1, 1.0), (z0, -1.0)):
        with np.errstate(divide="ignore", invalid="ignore"):
            t_cap = (z_cap - origins[:, 2]) / dirs[:, 2]
        p = oxy + dxy * np.where(np.isfinite(t_cap), t_cap, 0)[:, None]
        cap = np.isfinite(t_cap) & (t_cap > 0) & (np.sum(p * p, axis=-1) <= radius**2)
        closer = cap & (t_cap < best_t)
        best_t = np.where(closer, t_cap, best_t)
        best_n = np.where(closer[:, None], np.array([0.0, 0.0, sign]), best_n)
    return best_t, best_n


def _checker(points: Array, normals: Array) -> Array:
    cells = np.floor(points[:, 0] / 0.4) + np.floor(points[:, 1] / 0.4)
    top = normals[:, 2] > 0.5
    light, dark = np.array([0.92, 0.9, 0.82]), np.array([0.18, 0.32, 0.55])
    colour = np.where((cells % 2 == 0)[:, None], light, dark)
    return np.where(top[:, None], colour, np.array([0.55, 0.5, 0.45]))


def _cube_faces(points: Array, normals: Array) -> Array:
    face_colours = np.array(
        [[0.85, 0.2, 0.15], [0.95, 0.6, 0.1], [0.2, 0.7, 0.3], [0.6, 0.2, 0.7], [0.95, 0.95, 0.95], [0.1, 0.1, 0.1]]
    )
    axis = np.argmax(np.abs(normals), axis=-1)
    positive = np.take_along_axis(normals, axis[:, None], axis=-1)[:, 0] > 0
    return face_colours[2 * axis + positive.astype(int)]


def _stripes(points: Array, normals: Array) -> Array:
    band = np.floor(points[:, 2] / 0.15) % 2 == 0
    return np.where(band[:, None], np.array([0.95, 0.85, 0.2]), np.array([0.15, 0.15, 0.2]))


def _solid(colour: Sequence[float]) -> Callable[[Array, Array], Array]:
    return lambda points, normals: np.broadcast_to(np.asarray(colour, dtype=np.float64), points.shape)


Object = Tuple[Callable[[Array, Array], Hit], Callable[[Array, Array], Array]]
"""How to intersect an object with rays, and how to colour a hit (points, outward normals)."""


def _sphere_checker(cells: int) -> Callable[[Array, Array], Array]:
    """A latitude-longitude checker of a sphere (by its normals), ``cells`` cells around, in three colours."""

    def albedo(points: Array, normals: Array) -> Array:
        azimuth = np.arctan2(normals[:, 1], normals[:, 0]) / (2 * math.pi) + 0.5
        polar = np.arccos(np.clip(normals[:, 2], -1, 1)) / math.pi
        index = (np.floor(azimuth * cells) + np.floor(polar * cells / 2)).astype(int) % 3
        return np.array([[0.95, 0.9, 0.8], [0.7, 0.1, 0.15], [0.1, 0.2, 0.5]])[index]

    return albedo


def _fine_stripes(points: Array, normals: Array) -> Array:
    """Diagonal stripes 0.08 units wide in four colours."""
    index = np.floor((points[:, 0] + points[:, 1] + points[:, 2]) / 0.08).astype(int) % 4
    return np.array([[0.95, 0.95, 0.9], [0.15, 0.15, 0.15], [0.9, 0.55, 0.1], [0.2, 0.6, 0.65]])[index]


def _bar(lo: Sequence[float], hi: Sequence[float], colour: Sequence[float]) -> Object:
    return (lambda o, d: _box(o, d, lo, hi)), _solid(colour)


def _thin_objects() -> Tuple[Object, ...]:
    """A pole, six bars 0.05 thick at different heights and directions, and a plate 0.02 thick on a thin disc."""
    objects = [
        ((lambda o, d: _cylinder(o, d, (0.0, 0.0), 0.5, -0.62, -0.58)), _solid((0.5, 0.45, 0.4))),
        ((lambda o, d: _cylinder(o, d, (0.0, 0.0), 0.03, -0.58, 0.9)), _solid((0.3, 0.3, 0.35))),
    ]
    colours = [(0.85, 0.2, 0.15), (0.2, 0.6, 0.25), (0.15, 0.3, 0.8), (0.9, 0.7, 0.1), (0.6, 0.2, 0.7), (0.1, 0.6, 0.6)]
    for i, colour in enumerate(colours):
        z, w, length = -0.4 + 0.22 * i, 0.025, 0.45 + 0.1 * i
        offset = 0.04 * (i - 2.5)
        if i % 2 == 0:
            objects.append(_bar((-length, offset - w, z - w), (length, offset + w, z + w), colour))
        else:
            objects.append(_bar((offset - w, -length, z - w), (offset + w, length, z + w), colour))
    objects.append(_bar((0.2, 0.25, -0.58), (0.7, 0.27, 0.1), (0.95, 0.95, 0.9)))
    return tuple(objects)


def _cup_objects() -> Tuple[Object, ...]:
    """A box open at the top (floor and four walls 0.06 thick) holding a sphere, and an arch in front of it."""
    wall, lo, hi, z0, z1 = 0.06, -0.55, 0.35, -0.6, 0.1
    inside, outside = (0.9, 0.8, 0.55), (0.45, 0.25, 0.15)
    objects = [
        _bar((lo, lo, z0), (hi, hi, z0 + wall), inside),
        _bar((lo, lo, z0), (lo + wall, hi, z1), outside),
        _bar((hi - wall, lo, z0), (hi, hi, z1), outside),
        _bar((lo, lo, z0), (hi, lo + wall, z1), inside),
        _bar((lo, hi - wall, z0), (hi, hi, z1), inside),
        ((lambda o, d: _sphere(o, d, (-0.1, -0.1, -0.25), 0.28)), _solid((0.2, 0.45, 0.9))),
        _bar((0.55, -0.7, -0.6), (0.7, -0.55, 0.5), (0.7, 0.7, 0.72)),
        _bar((0.55, 0.45, -0.6), (0.7, 0.6, 0.5), (0.7, 0.7, 0.72)),
        _bar((0.5, -0.75, 0.5), (0.75, 0.65, 0.65), (0.85, 0.3, 0.2)),
    ]
    return tuple(objects)


SCENES: Dict[str, Tuple[Object, ...]] = {
    "objects": (
        ((lambda o, d: _box(o, d, (-0.8, -0.8, -0.6), (0.8, 0.8, -0.4))), _checker),  # slab
        ((lambda o, d: _box(o, d, (-0.65, -0.65, -0.4), (-0.05, -0.05, 0.2))), _cube_faces),  # cube
        ((lambda o, d: _cylinder(o, d, (0.4, -0.35), 0.2, -0.4, 0.55)), _stripes),  # cylinder
        ((lambda o, d: _sphere(o, d, (0.3, 0.35, -0.1), 0.3)), _solid((0.2, 0.45, 0.9))),  # sphere
    ),
    "thin": _thin_objects(),
    "texture": (
        ((lambda o, d: _sphere(o, d, (-0.2, 0.3, 0.0), 0.6)), _sphere_checker(16)),
        ((lambda o, d: _box(o, d, (0.1, -0.8, -0.6), (0.7, -0.2, 0.4))), _fine_stripes),
    ),
    "cup": _cup_objects(),
    "large": (
        ((lambda o, d: _sphere(o, d, (0.45, -0.4, 0.2), 0.95)), _sphere_checker(8)),
        ((lambda o, d: _box(o, d, (-1.35, -0.2, -1.2), (-0.3, 1.35, -0.3))), _cube_faces),
    ),
}
"""The scenes' objects by kind, inside the Blender parser's scene box [-1.5, 1.5]^3: ``objects`` (a checkered slab, a
cube with one colour per face, a striped cylinder, a sphere; inside [-0.8, 0.8]^3), ``thin`` (bars and a plate under a
pixel wide at 1/16 of 800 pixels), ``texture`` (a fine checker and stripes), ``cup`` (concave and occluding: an open
box holding a sphere behind an arch), ``large`` (a sphere and a block off-centre, reaching 1.35 from the centre)."""
SCENE = SCENES["objects"]


def cast_rays(
    origins: Float[Array, "n 3"], dirs: Float[Array, "n 3"], objects: Sequence[Object] = SCENE
) -> Tuple[Float[Array, "n 3"], Array]:
    """Colours ``[n, 3]`` of rays shaded against ``objects`` (zero for a miss) and the hit mask ``[n]``."""
    origins = np.asarray(origins, dtype=np.float64)
    dirs = np.asarray(dirs, dtype=np.float64)
    dirs = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
    best_t = np.full(len(origins), np.inf)
    best_n = np.zeros_like(origins)
    best_id = np.full(len(origins), -1)
    for i, (intersect, _) in enumerate(objects):
        t, n = intersect(origins, dirs)
        closer = t < best_t
        best_t = np.where(closer, t, best_t)
        best_n = np.where(closer[:, None], n, best_n)
        best_id = np.where(closer, i, best_id)
    hit = np.isfinite(best_t)
    points = origins + dirs * np.where(hit, best_t, 0)[:, None]
    colours = np.zeros_like(origins)
    for i, (_, albedo) in enumerate(objects):
        sel = best_id == i
        if sel.any():
            shade = 0.35 + 0.65 * np.clip(best_n[sel] @ LIGHT, 0, 1)
            colours[sel] = albedo(points[sel], best_n[sel]) * shade[:, None]
    return np.clip(colours, 0, 1), hit


def look_at(position: Sequence[float], target: Sequence[float] = (0.0, 0.0, 0.0)) -> Float[Array, "4 4"]:
    """Camera-to-world matrix (OpenGL/Blender: the camera looks along its -z, +y up) with world +z up."""
    position = np.asarray(position, dtype=np.float64)
    back = position - np.asarray(target, dtype=np.float64)
    back /= np.linalg.norm(back)
    right = np.cross([0.0, 0.0, 1.0], back)
    if np.linalg.norm(right) < 1e-8:  # looking straight down or up
        right = np.array([1.0, 0.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, up, back, position
    return c2w


def orbit_pose(azimuth_deg: float, elevation_deg: float, distance: float = CAMERA_DISTANCE) -> Float[Array, "4 4"]:
    """A camera on a sphere around the origin, looking at it."""
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    position = distance * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    return look_at(position)


def pixel_rays(
    c2w: Float[Array, "4 4"], size: int, camera_angle_x: float, supersample: int
) -> Tuple[Float[Array, "n 3"], Float[Array, "n 3"]]:
    """Origins and directions of ``supersample**2`` rays per pixel of a square pinhole camera (pixel centres at
    half-integers, as nerfstudio's), grouped by ``reshape(size, supersample, size, supersample, ...)``."""
    focal = 0.5 * size / math.tan(0.5 * camera_angle_x)
    offsets = (np.arange(supersample) + 0.5) / supersample
    coords = np.arange(size)[:, None] + offsets[None, :]  # [size, ss]
    v, u = np.meshgrid(coords.ravel(), coords.ravel(), indexing="ij")
    dirs_cam = np.stack([(u - size / 2) / focal, -(v - size / 2) / focal, -np.ones_like(u)], axis=-1).reshape(-1, 3)
    dirs = dirs_cam @ c2w[:3, :3].T
    return np.broadcast_to(c2w[:3, 3], dirs.shape), dirs


def render_view(
    c2w: Float[Array, "4 4"],
    size: int,
    camera_angle_x: float = CAMERA_ANGLE_X,
    supersample: int = 3,
    objects: Sequence[Object] = SCENE,
) -> Float[Array, "size size 4"]:
    """Render an RGBA image (straight alpha) of ``objects``, ``supersample**2`` rays per pixel."""
    origins, dirs = pixel_rays(c2w, size, camera_angle_x, supersample)
    colours, hit = cast_rays(origins, dirs, objects)
    ss = supersample
    rgba = np.concatenate([colours * hit[:, None], hit[:, None].astype(np.float64)], axis=-1)
    rgba = rgba.reshape(size, ss, size, ss, 4).mean(axis=(1, 3))
    alpha = rgba[..., 3:]
    rgb = np.where(alpha > 0, rgba[..., :3] / np.maximum(alpha, 1e-8), 0.0)  # un-premultiply
    return np.concatenate([rgb, alpha], axis=-1)


RAY_BYTES = 1024
"""Memory a ray of a view takes while it is cast and shaded (float64 vectors per object)."""


def check_render_memory(image_size: int, supersample: int) -> None:
    """Raise :class:`UsageError` naming --image-size when one view's rays cannot fit in memory."""
    from rff_field.common.machine import check_memory

    check_memory("--image-size", image_size, lambda size: RAY_BYTES * (size * supersample) ** 2)


@dataclass
class SceneSpec:
    """What :func:`write_blender_scene` generates."""

    image_size: int = 64
    """Width and height of every image (pixels)."""
    num_train_views: int = 50
    """Training views (random, upper part of the sphere)."""
    num_val_views: int = 4
    """Validation views."""
    num_test_views: int = 8
    """Test views (an orbit at 30 degrees elevation)."""
    seed: int = 0
    """Seed of the training and validation poses."""
    supersample: int = 3
    """Rays per pixel side (anti-aliasing)."""
    kind: Literal["objects", "thin", "texture", "cup", "large"] = "objects"
    """Which objects: objects (a slab, a cube, a cylinder, a sphere), thin (bars under a pixel wide at 1/16 of 800
    pixels), texture (a fine checker and stripes), cup (concave, occluding), large (off-centre, near the box's
    faces)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for sizes or counts that make no scene."""
        check_fields(self, positive_int=("num_train_views", "num_val_views", "num_test_views", "supersample"),
                     non_negative_int=("seed",))  # fmt: skip
        if self.image_size < 8:
            raise UsageError(f"--image-size must be at least 8, got {self.image_size}")
        check_render_memory(self.image_size, self.supersample)


def scene_poses(spec: SceneSpec) -> dict:
    """Camera-to-world matrices for each split."""
    rng = np.random.default_rng(spec.seed)

    def random_poses(n: int) -> List[Array]:
        azimuth = rng.uniform(0, 360, n)
        # uniform on the sphere between -10 and 75 degrees of elevation
        elevation = np.degrees(np.arcsin(rng.uniform(math.sin(math.radians(-10)), math.sin(math.radians(75)), n)))
        return [orbit_pose(a, e) for a, e in zip(azimuth, elevation)]

    test = [orbit_pose(15 + 360 * i / spec.num_test_views, 30.0) for i in range(spec.num_test_views)]
    return {"train": random_poses(spec.num_train_views), "val": random_poses(spec.num_val_views), "test": test}


def write_blender_scene(output_dir: Path, spec: SceneSpec = SceneSpec(), progress: bool = False) -> Path:
    """Render the scene into ``output_dir``: ``transforms_{train,val,test}.json`` and ``{split}/r_{i}.png`` (with a
    progress bar when ``progress``); returns ``output_dir``."""
    output_dir = Path(output_dir)
    poses = scene_poses(spec)
    jobs = [(split, i, pose) for split, split_poses in poses.items() for i, pose in enumerate(split_poses)]
    from rich.progress import track

    frames: dict = {split: [] for split in poses}
    iterator = track(jobs, description="Rendering the synthetic scene") if progress else jobs
    for split, i, pose in iterator:
        (output_dir / split).mkdir(parents=True, exist_ok=True)
        rgba = render_view(pose, spec.image_size, supersample=spec.supersample, objects=SCENES[spec.kind])
        Image.fromarray(np.round(rgba * 255).astype(np.uint8), mode="RGBA").save(output_dir / split / f"r_{i}.png")
        frames[split].append({"file_path": f"./{split}/r_{i}", "rotation": 0.0, "transform_matrix": pose.tolist()})
    for split, split_frames in frames.items():
        meta = {"camera_angle_x": CAMERA_ANGLE_X, "frames": split_frames}
        (output_dir / f"transforms_{split}.json").write_text(json.dumps(meta, indent=2))
    return output_dir


GROUND_Z = -0.6
"""Height of the ground plane (the slab's underside)."""
GROUND_RADIUS = 12.0
"""The ground plane ends at this distance from the origin; beyond it the rays see the sky."""
CAPTURE_ANGLE_X = math.radians(60.0)
"""Horizontal field of view of the capture's cameras (a phone's wide lens)."""


def _ground_colour(points: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
    """Large grass and stone tiles (0.75 units), lit like the objects, fading towards the horizon colour."""
    cells = np.floor(points[:, 0] / 0.75) + np.floor(points[:, 1] / 0.75)
    tiles = np.where((cells % 2 == 0)[:, None], np.array([0.36, 0.55, 0.25]), np.array([0.62, 0.6, 0.55]))
    shaded = tiles * (0.35 + 0.65 * LIGHT[2])
    fade = np.clip(np.linalg.norm(points[:, :2], axis=-1) / GROUND_RADIUS, 0, 1)[:, None] ** 2
    return (1 - fade) * shaded + fade * np.array([0.8, 0.85, 0.9])


def sky_colour(dirs: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
    """The sky at infinity (a function of the direction only): a horizon-to-zenith gradient with cloud bands."""
    dirs = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
    height = np.clip(dirs[:, 2], 0, 1)[:, None]
    gradient = (1 - height) * np.array([0.8, 0.85, 0.9]) + height * np.array([0.25, 0.45, 0.85])
    azimuth = np.arctan2(dirs[:, 1], dirs[:, 0])
    clouds = np.clip(np.sin(5 * azimuth + 8 * dirs[:, 2]) * np.sin(3 * azimuth - 2.0), 0, 1) ** 2
    clouds = clouds * np.clip(4 * dirs[:, 2] + 0.2, 0, 1)  # none below the horizon
    return (1 - clouds[:, None]) * gradient + clouds[:, None] * np.array([0.97, 0.97, 0.97])


def cast_rays_unbounded(origins: Float[Array, "n 3"], dirs: Float[Array, "n 3"]) -> Float[Array, "n 3"]:
    """Shade rays against the objects, then the ground plane (which the objects stand on), then the sky."""
    origins = np.asarray(origins, dtype=np.float64)
    dirs = np.asarray(dirs, dtype=np.float64)
    dirs = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
    colours, hit = cast_rays(origins, dirs)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (GROUND_Z - origins[:, 2]) / dirs[:, 2]
    points = origins + dirs * np.where(np.isfinite(t) & (t > 0), t, 0)[:, None]
    ground = ~hit & np.isfinite(t) & (t > 0) & (np.linalg.norm(points[:, :2], axis=-1) <= GROUND_RADIUS)
    sky = ~hit & ~ground
    colours[ground] = _ground_colour(points[ground])
    colours[sky] = sky_colour(dirs[sky])
    return np.clip(colours, 0, 1)


@dataclass
class CaptureSpec:
    """What :func:`write_nerfstudio_capture` generates."""

    image_size: int = 64
    """Width and height of every image (pixels)."""
    num_views: int = 40
    """Photos (nerfstudio's parser holds out one in ten for evaluation: ns-train needs 10)."""
    distance_min: float = 2.5
    """Nearest camera distance from the origin."""
    distance_max: float = 4.5
    """Farthest camera distance."""
    seed: int = 0
    """Seed of the camera positions."""
    supersample: int = 3
    """Rays per pixel side (anti-aliasing)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for sizes, counts or distances that make no capture ns-train can read."""
        check_fields(self, positive_int=("supersample",), non_negative_int=("seed",))
        if self.image_size < 8 or self.num_views < 10:
            raise UsageError(f"--image-size must be at least 8 and --num-views at least 10 (ns-train holds one in ten "
                             f"out), got {self.image_size} and {self.num_views}")  # fmt: skip
        if not 0 < self.distance_min <= self.distance_max < math.inf:
            raise UsageError(f"need 0 < --distance-min <= --distance-max < inf, got {self.distance_min} and "
                             f"{self.distance_max}")  # fmt: skip
        check_render_memory(self.image_size, self.supersample)


def capture_poses(spec: CaptureSpec) -> List[Array]:
    """Cameras around the objects, above the ground (5 to 45 degrees of elevation), looking at the origin."""
    rng = np.random.default_rng(spec.seed)
    azimuth = 360 * (np.arange(spec.num_views) + rng.uniform(0, 1, spec.num_views)) / spec.num_views
    elevation = rng.uniform(5, 45, spec.num_views)
    distance = rng.uniform(spec.distance_min, spec.distance_max, spec.num_views)
    return [orbit_pose(a, e, d) for a, e, d in zip(azimuth, elevation, distance)]


def write_nerfstudio_capture(output_dir: Path, spec: CaptureSpec = CaptureSpec(), progress: bool = False) -> Path:
    """Render the unbounded scene into ``output_dir``: ``transforms.json`` and ``images/frame_<i>.png`` (with a
    progress bar when ``progress``); returns ``output_dir``."""
    output_dir = Path(output_dir)
    from rich.progress import track

    (output_dir / "images").mkdir(parents=True, exist_ok=True)
    poses = capture_poses(spec)
    frames = []
    for i, pose in enumerate(track(poses, description="Rendering the capture") if progress else poses):
        origins, dirs = pixel_rays(pose, spec.image_size, CAPTURE_ANGLE_X, spec.supersample)
        ss, size = spec.supersample, spec.image_size
        rgb = cast_rays_unbounded(origins, dirs).reshape(size, ss, size, ss, 3).mean(axis=(1, 3))
        name = f"images/frame_{i + 1:05d}.png"
        Image.fromarray(np.round(rgb * 255).astype(np.uint8), mode="RGB").save(output_dir / name)
        frames.append({"file_path": name, "transform_matrix": pose.tolist()})
    focal = 0.5 * spec.image_size / math.tan(0.5 * CAPTURE_ANGLE_X)
    centre = spec.image_size / 2
    meta = {"camera_model": "OPENCV", "fl_x": focal, "fl_y": focal, "cx": centre, "cy": centre,
            "w": spec.image_size, "h": spec.image_size, "frames": frames}  # fmt: skip
    (output_dir / "transforms.json").write_text(json.dumps(meta, indent=2))
    return output_dir
