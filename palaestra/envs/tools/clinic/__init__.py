"""The clinic domain: patients, doctors' schedules, appointments and waitlists."""

from palaestra.envs.tools.clinic.backend import Clinic

__all__ = ["Clinic"]
