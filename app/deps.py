"""FastAPI dependencies: the settings and the analysis service of the running app."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from .service import AnalysisService
from .settings import Settings


def get_service(request: Request) -> AnalysisService:
    return request.app.state.service


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


ServiceDep = Annotated[AnalysisService, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
