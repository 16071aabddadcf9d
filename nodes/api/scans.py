"""/api/nodes/scans/: look for laptops that came back at another address (a new DHCP lease), by the host keys
pinned when they were added (nodes/laptops/refind.py). A scan runs in the background; its record says what it found."""

from datetime import datetime

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Field, Router, Schema, Status

from clusterpanel.accounts.apiauth import admin_only
from clusterpanel.kit.apikit import ApiError, Input, errors, existing
from nodes.laptops import refind
from nodes.models import LanScan

router = Router()


class ScanIn(Input):
    addresses: str = Field(max_length=100, description=(
        f"A CIDR (192.168.1.0/24), a first-last range (192.168.1.20-192.168.1.80) or one address; at most "
        f"{refind.MOST_ADDRESSES} addresses."))
    public: bool = Field(False, description="Allow addresses outside private, link-local and loopback space (a lab "
                                            "on public addresses); refused otherwise.")


class MoveOut(Schema):
    name: str
    host: str = Field(description="Where it answers now, with its pinned host key.")
    was: str
    follows: list[str] = Field(description="What the move sets going for the deployments holding it, in words.")


class ScanOut(Schema):
    id: int
    addresses: str
    public: bool
    status: str = Field(description="queued, running, succeeded or failed.")
    summary: str = Field(description='Once it has ended: "Found lab-07 at 10.0.0.23 (was 10.0.0.17)." or "No laptop '
                                     'answered with a known key (...)."')
    moved: list[MoveOut]
    error: str
    created: datetime
    finished: datetime | None
    url: str


def scan_row(scan: LanScan) -> dict:
    return {"id": scan.pk, "addresses": scan.addresses, "public": scan.public, "status": scan.status,
            "summary": scan.summary, "moved": scan.moved, "error": scan.error, "created": scan.created,
            "finished": scan.finished, "url": reverse("api:get_scan", kwargs={"pk": scan.pk})}


@router.post("/", response={202: ScanOut, **errors(403)}, summary="Find laptops that moved to another address")
def start_scan(request: HttpRequest, payload: ScanIn):
    user = admin_only(request, "look for moved laptops")
    try:
        scan = refind.start(payload.addresses, payload.public, user)
    except refind.RangeRefused as exc:
        raise ApiError(f"{exc} Nothing was scanned.", 400, "addresses") from None
    return Status(202, scan_row(scan))


@router.get("/{int:pk}/", response={200: ScanOut, **errors(403, 404)}, url_name="get_scan",
            summary="What a search for moved laptops found")
def get_scan(request: HttpRequest, pk: int):
    admin_only(request, "look for moved laptops")
    return scan_row(get_object_or_404(LanScan, pk=existing(pk, "scan")))
